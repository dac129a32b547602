// Command p9client drives a 9P2000.L server with github.com/hugelgupf/p9/p9.
//
//	p9client -addr 127.0.0.1:5640 -scenario ramfs|taskbag
//	p9client -addr 127.0.0.1:5640 -scenario export -hostdir DIR
//
// Scenario export is scenario ramfs against 'ninep serve DIR' on this
// machine, with each step also checked on the host in DIR.
//
// It exits 0 after printing PASS, or 1 at the first failed check, saying
// what was expected and what came back.
package main

import (
	"fmt"

	"github.com/hugelgupf/p9/p9"

	h "ninep/interop/internal/harness"
	"ninep/interop/internal/scenario"
)

const (
	// msize asked for: small enough that the payload takes several
	// Twrite and Tread messages, and larger than diod's (64 KiB), so that
	// through a mux of diod a write is larger than diod takes in one.
	msize = 128 * 1024
	// atRemoveDir is Linux's AT_REMOVEDIR, for Tunlinkat of a directory.
	atRemoveDir = 0x200
	// readBuf is how much a read asks for at a time.
	readBuf = 100 * 1024
)

func main() {
	cfg := h.Parse("p9client")
	nc := h.Dial(cfg.Addr)
	h.Step("Tversion 9P2000.L (msize %d)", msize)
	c, err := p9.NewClient(nc, p9.WithMessageSize(msize))
	h.Check(err, "version negotiation")
	h.Step("Tattach")
	root, err := c.Attach("")
	h.Check(err, "attach")
	switch cfg.Scenario {
	case "ramfs", "export":
		ramfs(root)
	case "taskbag":
		taskbag(root)
	}
	h.Step("clunk root and hang up")
	h.Check(root.Close(), "clunk root")
	c.Close()
	h.Pass()
}

// walk walks from dir along path; no names clones dir.
func walk(dir p9.File, path ...string) p9.File {
	qids, f, err := dir.Walk(path)
	h.Check(err, "walk %q", path)
	h.Equal(fmt.Sprintf("number of qids from walk %q", path), len(path), len(qids))
	return f
}

// list reads a whole directory with Treaddir and returns its names,
// without . and ..
func list(dir p9.File, what string) []string {
	d := walk(dir)
	defer d.Close()
	_, _, err := d.Open(p9.ReadOnly)
	h.Check(err, "open directory %s", what)
	var names []string
	var off uint64
	for i := 0; ; i++ {
		if i > 100000 {
			h.Failf("readdir of %s: expected the end within 100000 calls, got %d entries so far", what, len(names))
		}
		ents, err := d.Readdir(off, msize-64)
		h.Check(err, "readdir %s at offset %d", what, off)
		if len(ents) == 0 {
			return names
		}
		for _, e := range ents {
			if e.Name != "." && e.Name != ".." {
				names = append(names, e.Name)
			}
		}
		next := ents[len(ents)-1].Offset
		if next == off {
			h.Failf("readdir %s at offset %d: expected the last entry's offset to move on, got %d again", what, off, next)
		}
		off = next
	}
}

func readFile(dir p9.File, path ...string) []byte {
	f := walk(dir, path...)
	defer f.Close()
	_, _, err := f.Open(p9.ReadOnly)
	h.Check(err, "open %q for reading", path)
	return h.ReadAll(f, readBuf)
}

// absent checks that name cannot be walked to in dir.
func absent(dir p9.File, what, name string) {
	_, f, err := dir.Walk([]string{name})
	if err == nil {
		f.Close()
	}
	h.MustFail(err, "walk to %s/%s", what, name)
}

func getattr(f p9.File, what string) p9.Attr {
	_, mask, attr, err := f.GetAttr(p9.AttrMaskAll)
	h.Check(err, "getattr %s", what)
	h.Equal("getattr of "+what+" reports size", true, mask.Size)
	h.Equal("getattr of "+what+" reports mode", true, mask.Mode)
	return attr
}

// create makes name in dir, open with flags; the returned file is open.
func create(dir p9.File, name string, flags p9.OpenFlags, perm p9.FileMode) p9.File {
	f := walk(dir)
	nf, _, _, err := f.Create(name, flags, perm, p9.NoUID, p9.NoGID)
	if err != nil {
		f.Close()
	}
	h.Check(err, "create %q", name)
	return nf
}

func ramfs(root p9.File) {
	top := h.Unique("p9client")

	h.Step("mkdir %s", top)
	qid, err := root.Mkdir(top, 0o755, p9.NoUID, p9.NoGID)
	h.Check(err, "mkdir %q", top)
	h.Equal("qid type of new directory", p9.TypeDir, qid.Type)
	dir := walk(root, top)
	h.HostIsDir(top)

	payload := h.Payload(h.PayloadSize)
	h.Step("create %s/data and write %d bytes", top, len(payload))
	f := create(dir, "data", p9.ReadWrite, 0o644)
	head := []byte("hello, 9P\n")
	h.WriteAll(f, head, 0, "header")
	h.WriteAll(f, payload, int64(len(head)), "payload")
	want := append(append([]byte{}, head...), payload...)
	h.Step("read back %s/data through the fid that created it", top)
	h.SameBytes("content read through creating fid", want, h.ReadAll(f, readBuf))
	h.Step("read 5000 bytes at offset 100003 of %s/data", top)
	mid := make([]byte, 5000)
	n, err := f.ReadAt(mid, 100003)
	h.Check(err, "read 5000 bytes at offset 100003")
	h.Equal("bytes read at offset 100003", len(mid), n)
	h.SameBytes("content at offset 100003", want[100003:105003], mid)
	h.Step("getattr %s/data through the open fid", top)
	h.Equal("size from getattr on open fid", uint64(len(want)), getattr(f, "open data").Size)
	h.Check(f.Close(), "clunk data")
	h.HostFile(top+"/data", want, 0o644)

	h.Step("read back %s/data through a new fid", top)
	h.SameBytes("content read through new fid", want, readFile(dir, "data"))

	h.Step("getattr %s/data", top)
	f = walk(dir, "data")
	a := getattr(f, "data")
	h.Equal("size", uint64(len(want)), a.Size)
	h.Equal("mode is a regular file", true, a.Mode.IsRegular())
	h.Equal("permission bits", p9.FileMode(0o644), a.Mode.Permissions())
	h.HostOwner(top+"/data", uint32(a.UID), uint32(a.GID))
	h.Check(f.Close(), "clunk data")

	h.Step("renameat %s/data to moved", top)
	h.Check(dir.RenameAt("data", dir, "moved"), "renameat data to moved")
	absent(dir, top, "data")
	h.HostAbsent(top + "/data")
	h.HostFile(top+"/moved", want, 0o644)
	f = walk(dir, "moved")
	h.Equal("size after renameat", uint64(len(want)), getattr(f, "moved").Size)
	h.ExactlyOnce("listing of "+top+" after renameat", []string{"moved"}, list(dir, top))

	h.Step("rename (Trename) %s/moved to final", top)
	h.Check(f.Rename(dir, "final"), "rename moved to final")
	h.Check(f.Close(), "clunk renamed file")
	absent(dir, top, "moved")
	h.ExactlyOnce("listing of "+top+" after rename", []string{"final"}, list(dir, top))
	h.SameBytes("content after renames", want, readFile(dir, "final"))
	h.HostAbsent(top + "/moved")
	h.HostFile(top+"/final", want, 0o644)

	h.Step("unlinkat %s/final", top)
	h.Check(dir.UnlinkAt("final", 0), "unlinkat final")
	absent(dir, top, "final")
	h.ExactlyOnce("listing of "+top+" after unlinkat", nil, list(dir, top))
	h.HostListing(top, nil)

	h.Step("mkdir %s/many", top)
	_, err = dir.Mkdir("many", 0o755, p9.NoUID, p9.NoGID)
	h.Check(err, "mkdir many")
	many := walk(dir, "many")

	want10k := h.ManyNames(h.ManyFiles)
	h.Step("create %d empty files in %s/many", h.ManyFiles, top)
	h.Each(want10k, func(name string) error {
		_, f, err := many.Walk(nil)
		if err != nil {
			return fmt.Errorf("walk clone of many: %w", err)
		}
		nf, _, _, err := f.Create(name, p9.WriteOnly, 0o644, p9.NoUID, p9.NoGID)
		if err != nil {
			f.Close()
			return fmt.Errorf("create many/%s: %w", name, err)
		}
		return nf.Close()
	})

	h.Step("list %s/many", top)
	h.ExactlyOnce("listing of "+top+"/many", want10k, list(many, top+"/many"))
	h.HostListing(top+"/many", want10k)
	h.Step("getattr %s/many/%s", top, want10k[h.ManyFiles-1])
	f = walk(many, want10k[h.ManyFiles-1])
	h.Equal("size of empty file", uint64(0), getattr(f, want10k[h.ManyFiles-1]).Size)
	h.Check(f.Close(), "clunk")

	h.Step("unlinkat the %d files of %s/many", h.ManyFiles, top)
	h.Each(want10k, func(name string) error {
		if err := many.UnlinkAt(name, 0); err != nil {
			return fmt.Errorf("unlinkat many/%s: %w", name, err)
		}
		return nil
	})
	h.Step("list %s/many after removing its files", top)
	h.ExactlyOnce("listing of "+top+"/many after removing all", nil, list(many, top+"/many"))
	h.HostListing(top+"/many", nil)
	h.Check(many.Close(), "clunk many")

	h.Step("unlinkat %s/many and %s", top, top)
	h.Check(dir.UnlinkAt("many", atRemoveDir), "unlinkat many")
	h.Check(dir.Close(), "clunk %s", top)
	h.Check(root.UnlinkAt(top, atRemoveDir), "unlinkat %s", top)
	absent(root, "", top)
	h.NotIn("/", list(root, "/"), top)
	h.HostAbsent(top)
}

func taskbag(root p9.File) {
	h.Step("list the root")
	scenario.CheckTaskbagRoot(list(root, "/"))
	questions := walk(root, "questions")
	defer questions.Close()

	// A question answered.
	q := h.Unique("q-p9")
	question := []byte("What is the answer to " + q + "?\n")
	answer := []byte("42, says p9client.\n")
	ask(root, questions, q, question)

	h.Step("worker opens questions/%s read-write", q)
	w := walk(questions, q)
	_, _, err := w.Open(p9.ReadWrite)
	h.Check(err, "open questions/%s ReadWrite", q)
	where(root, q, "working")
	h.Step("a second open of working/%s while the worker has it", q)
	other := walk(root, "working", q)
	_, _, err = other.Open(p9.ReadOnly)
	other.Close()
	h.MustFail(err, "open of exclusive-use working/%s while the worker has it open", q)
	h.Step("worker reads the question of %s", q)
	h.SameBytes("question read by worker", question, h.ReadAll(w, readBuf))
	h.Step("worker writes the answer to %s", q)
	h.WriteAll(w, answer, int64(len(question)), "answer")
	h.Step("worker closes %s after writing", q)
	h.Check(w.Close(), "clunk worker fid")
	where(root, q, "answers")
	h.Step("read answers/%s", q)
	h.SameBytes("content of answers/"+q, append(append([]byte{}, question...), answer...), readFile(root, "answers", q))

	// A question given up on.
	q2 := h.Unique("q-p9-giveup")
	question2 := []byte("Will anyone answer " + q2 + "?\n")
	ask(root, questions, q2, question2)
	h.Step("worker opens questions/%s read-write", q2)
	w = walk(questions, q2)
	_, _, err = w.Open(p9.ReadWrite)
	h.Check(err, "open questions/%s ReadWrite", q2)
	where(root, q2, "working")
	h.Step("worker closes %s without writing", q2)
	h.Check(w.Close(), "clunk worker fid")
	where(root, q2, "questions")
	h.Step("read questions/%s after the worker gave up", q2)
	h.SameBytes("content of returned question", question2, readFile(questions, q2))

	h.Step("clean up answers/%s and questions/%s", q, q2)
	answers := walk(root, "answers")
	defer answers.Close()
	h.Check(answers.UnlinkAt(q, 0), "unlinkat answers/%s", q)
	h.Check(questions.UnlinkAt(q2, 0), "unlinkat questions/%s", q2)
	h.NotIn("answers", list(answers, "answers"), q)
	h.NotIn("questions", list(questions, "questions"), q2)
}

// ask creates questions/q, writes question and closes it, and checks that
// it is listed in questions.
func ask(root, questions p9.File, q string, question []byte) {
	h.Step("create questions/%s", q)
	f := create(questions, q, p9.WriteOnly, 0o666)
	h.WriteAll(f, question, 0, "question")
	h.Check(f.Close(), "clunk questions/%s", q)
	where(root, q, "questions")
	h.Step("getattr questions/%s", q)
	f = walk(questions, q)
	h.Equal("size of question", uint64(len(question)), getattr(f, "questions/"+q).Size)
	h.Check(f.Close(), "clunk")
}

// where checks that q is listed in dir and in neither of the other two.
func where(root p9.File, q, dir string) {
	scenario.Where(func(d string) []string {
		f := walk(root, d)
		names := list(f, d)
		f.Close()
		return names
	}, q, dir)
}
