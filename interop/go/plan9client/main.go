// Command plan9client drives a 9P2000 server with 9fans.net/go/plan9/client.
//
//	plan9client -addr 127.0.0.1:5640 -scenario ramfs|taskbag
//	plan9client -addr 127.0.0.1:5640 -scenario export -hostdir DIR
//
// Scenario export is scenario ramfs against 'ninep serve DIR' on this
// machine, with each step also checked on the host in DIR.
//
// It exits 0 after printing PASS, or 1 at the first failed check, saying
// what was expected and what came back.
package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"sync"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"

	h "ninep/interop/internal/harness"
)

const (
	payloadSize = 300 * 1024
	manyFiles   = 10000
	parallel    = 8
	user        = "interop"
)

func main() {
	cfg := h.Parse("plan9client")
	h.Step("dial %s", cfg.Addr)
	nc, err := net.Dial("tcp", cfg.Addr)
	h.Check(err, "dial %s", cfg.Addr)
	h.Step("Tversion 9P2000")
	conn, err := client.NewConn(nc)
	h.Check(err, "version negotiation")
	h.Step("Tattach as %s", user)
	fs, err := conn.Attach(nil, user, "")
	h.Check(err, "attach")
	switch cfg.Scenario {
	case "ramfs", "export":
		ramfs(fs)
	case "taskbag":
		taskbag(fs)
	}
	h.Step("clunk root and hang up")
	h.Check(fs.Close(), "clunk root")
	conn.Close()
	h.Pass()
}

// list reads a whole directory and returns its entries' names.
func list(fs *client.Fsys, dir string) []string {
	fid, err := fs.Open(dir, plan9.OREAD)
	h.Check(err, "open directory %q for reading", dir)
	defer fid.Close()
	dirs, err := fid.Dirreadall()
	h.Check(err, "read directory %q", dir)
	names := make([]string, len(dirs))
	for i, d := range dirs {
		names[i] = d.Name
	}
	return names
}

// readAll reads a file from offset 0 to end of file through an open fid.
func readAll(fid *client.Fid) []byte {
	var out []byte
	buf := make([]byte, 256*1024) // larger than msize: reads take msize-IOHDRSZ
	for off := int64(0); ; {
		n, err := fid.ReadAt(buf, off)
		out = append(out, buf[:n]...)
		off += int64(n)
		if errors.Is(err, io.EOF) {
			return out
		}
		h.Check(err, "read at offset %d", off)
		if n == 0 {
			h.Failf("read at offset %d: expected data or end of file, got 0 bytes and no error", off)
		}
	}
}

func readFile(fs *client.Fsys, name string) []byte {
	fid, err := fs.Open(name, plan9.OREAD)
	h.Check(err, "open %q for reading", name)
	defer fid.Close()
	return readAll(fid)
}

func writeAll(fid *client.Fid, data []byte, off int64, what string) {
	n, err := fid.WriteAt(data, off)
	h.Check(err, "write %s (%d bytes at offset %d)", what, len(data), off)
	h.Equal("bytes written of "+what, len(data), n)
}

func ramfs(fs *client.Fsys) {
	top := h.Unique("plan9client")

	h.Step("create directory %s", top)
	d, err := fs.Create(top, plan9.OREAD, plan9.DMDIR|0o755)
	h.Check(err, "create directory %q", top)
	h.Equal("qid type of new directory has QTDIR", true, d.Qid().Type&plan9.QTDIR != 0)
	h.Check(d.Close(), "clunk new directory")
	h.HostIsDir(top)

	// A file written with a payload much larger than the msize of the
	// client (131072), so the write and the read take several messages.
	data := top + "/data"
	payload := h.Payload(payloadSize)
	h.Step("create %s and write %d bytes", data, len(payload))
	f, err := fs.Create(data, plan9.ORDWR, 0o644)
	h.Check(err, "create %q", data)
	head := []byte("hello, 9P\n")
	writeAll(f, head, 0, "header")
	writeAll(f, payload, int64(len(head)), "payload")
	want := append(append([]byte{}, head...), payload...)

	h.Step("read back %s through the fid that created it", data)
	h.SameBytes("content read through creating fid", want, readAll(f))
	h.Step("read 5000 bytes at offset 100003 of %s", data)
	mid := make([]byte, 5000)
	n, err := f.ReadAt(mid, 100003)
	h.Check(err, "read 5000 bytes at offset 100003")
	h.Equal("bytes read at offset 100003", len(mid), n)
	h.SameBytes("content at offset 100003", want[100003:105003], mid)
	h.Step("stat %s through the open fid", data)
	st, err := f.Stat()
	h.Check(err, "stat open fid")
	h.Equal("length from Tstat on open fid", uint64(len(want)), st.Length)
	h.Check(f.Close(), "clunk %q", data)
	h.HostFile(data, want, 0o644)

	h.Step("read back %s through a new fid", data)
	h.SameBytes("content read through new fid", want, readFile(fs, data))

	h.Step("stat %s", data)
	st, err = fs.Stat(data)
	h.Check(err, "stat %q", data)
	h.Equal("stat name", "data", st.Name)
	h.Equal("stat length", uint64(len(want)), st.Length)
	h.Equal("stat mode is a plain file", plan9.Perm(0), st.Mode&plan9.DMDIR)
	h.Equal("stat permission bits", plan9.Perm(0o644), st.Mode&0o777)
	h.Equal("stat qid type", uint8(plan9.QTFILE), st.Qid.Type)
	h.HostOwnerName(data, st.Uid)

	h.Step("rename %s to renamed with Twstat", data)
	var nd plan9.Dir
	nd.Null()
	nd.Name = "renamed"
	h.Check(fs.Wstat(data, &nd), "wstat name of %q to renamed", data)
	renamed := top + "/renamed"
	h.Step("check the old name %s is gone", data)
	_, err = fs.Stat(data)
	h.MustFail(err, "stat old name %q after rename", data)
	h.Step("check the new name %s is present", renamed)
	st, err = fs.Stat(renamed)
	h.Check(err, "stat new name %q after rename", renamed)
	h.Equal("stat name after rename", "renamed", st.Name)
	h.Equal("stat length after rename", uint64(len(want)), st.Length)
	names := list(fs, top)
	h.ExactlyOnce("listing of "+top+" after rename", []string{"renamed"}, names)
	h.SameBytes("content after rename", want, readFile(fs, renamed))
	h.HostAbsent(data)
	h.HostFile(renamed, want, 0o644)

	h.Step("remove %s", renamed)
	h.Check(fs.Remove(renamed), "remove %q", renamed)
	_, err = fs.Stat(renamed)
	h.MustFail(err, "stat %q after remove", renamed)
	h.ExactlyOnce("listing of "+top+" after remove", nil, list(fs, top))
	h.HostAbsent(renamed)
	h.HostListing(top, nil)

	many := top + "/many"
	h.Step("create directory %s", many)
	d, err = fs.Create(many, plan9.OREAD, plan9.DMDIR|0o755)
	h.Check(err, "create directory %q", many)
	h.Check(d.Close(), "clunk %q", many)

	want10k := h.ManyNames(manyFiles)
	h.Step("create %d empty files in %s", manyFiles, many)
	each(want10k, func(name string) error {
		f, err := fs.Create(many+"/"+name, plan9.OWRITE, 0o644)
		if err != nil {
			return fmt.Errorf("create %s/%s: %w", many, name, err)
		}
		return f.Close()
	})

	h.Step("list %s", many)
	names = list(fs, many)
	h.ExactlyOnce("listing of "+many, want10k, names)
	h.HostListing(many, want10k)
	h.Step("stat %s/%s", many, want10k[manyFiles-1])
	st, err = fs.Stat(many + "/" + want10k[manyFiles-1])
	h.Check(err, "stat last file")
	h.Equal("length of empty file", uint64(0), st.Length)

	h.Step("remove the %d files of %s", manyFiles, many)
	each(want10k, func(name string) error {
		if err := fs.Remove(many + "/" + name); err != nil {
			return fmt.Errorf("remove %s/%s: %w", many, name, err)
		}
		return nil
	})
	h.Step("list %s after removing its files", many)
	h.ExactlyOnce("listing of "+many+" after removing all", nil, list(fs, many))
	h.HostListing(many, nil)

	h.Step("remove %s and %s", many, top)
	h.Check(fs.Remove(many), "remove %q", many)
	h.Check(fs.Remove(top), "remove %q", top)
	h.NotIn("/", list(fs, "/"), top)
	h.HostAbsent(top)
}

// each runs fn on every name, a few at a time, and fails on the first error
// (in name order, so the report is stable).
func each(names []string, fn func(string) error) {
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	next := make(chan int)
	for w := 0; w < parallel; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				errs[i] = fn(names[i])
			}
		}()
	}
	for i := range names {
		next <- i
	}
	close(next)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			h.Failf("expected success, got error: %v", err)
		}
	}
}

func taskbag(fs *client.Fsys) {
	h.Step("list the root")
	root := list(fs, "/")
	sort.Strings(root)
	for _, d := range []string{"answers", "questions", "working"} {
		h.In("/", root, d)
	}

	// A question answered.
	q := h.Unique("q-plan9")
	question := []byte("What is the answer to " + q + "?\n")
	answer := []byte("42, says plan9client.\n")
	ask(fs, q, question)

	h.Step("worker opens questions/%s ORDWR", q)
	w, err := fs.Open("questions/"+q, plan9.ORDWR)
	h.Check(err, "open questions/%s ORDWR", q)
	where(fs, q, "working")
	h.Step("a second open of working/%s while the worker has it", q)
	other, err := fs.Open("working/"+q, plan9.OREAD)
	if err == nil {
		other.Close()
	}
	h.MustFail(err, "open of exclusive-use working/%s while the worker has it open", q)
	h.Step("worker reads the question of %s", q)
	h.SameBytes("question read by worker", question, readAll(w))
	h.Step("worker writes the answer to %s", q)
	writeAll(w, answer, int64(len(question)), "answer")
	h.Step("worker closes %s after writing", q)
	h.Check(w.Close(), "clunk worker fid")
	where(fs, q, "answers")
	h.Step("read answers/%s", q)
	h.SameBytes("content of answers/"+q, append(append([]byte{}, question...), answer...), readFile(fs, "answers/"+q))

	// A question given up on.
	q2 := h.Unique("q-plan9-giveup")
	ask(fs, q2, []byte("Will anyone answer "+q2+"?\n"))
	h.Step("worker opens questions/%s ORDWR", q2)
	w, err = fs.Open("questions/"+q2, plan9.ORDWR)
	h.Check(err, "open questions/%s ORDWR", q2)
	where(fs, q2, "working")
	h.Step("worker closes %s without writing", q2)
	h.Check(w.Close(), "clunk worker fid")
	where(fs, q2, "questions")
	h.Step("read questions/%s after the worker gave up", q2)
	h.SameBytes("content of returned question", []byte("Will anyone answer "+q2+"?\n"), readFile(fs, "questions/"+q2))

	h.Step("clean up answers/%s and questions/%s", q, q2)
	h.Check(fs.Remove("answers/"+q), "remove answers/%s", q)
	h.Check(fs.Remove("questions/"+q2), "remove questions/%s", q2)
	h.NotIn("answers", list(fs, "answers"), q)
	h.NotIn("questions", list(fs, "questions"), q2)
}

// ask creates questions/q, writes question and closes it, and checks that
// it is listed in questions as an exclusive-use file.
func ask(fs *client.Fsys, q string, question []byte) {
	h.Step("create questions/%s", q)
	f, err := fs.Create("questions/"+q, plan9.OWRITE, 0o666)
	h.Check(err, "create questions/%s", q)
	h.Equal("qid type of new question has QTEXCL", true, f.Qid().Type&plan9.QTEXCL != 0)
	writeAll(f, question, 0, "question")
	h.Check(f.Close(), "clunk questions/%s", q)
	where(fs, q, "questions")
	h.Step("stat questions/%s", q)
	st, err := fs.Stat("questions/" + q)
	h.Check(err, "stat questions/%s", q)
	h.Equal("DMEXCL in mode of question", plan9.DMEXCL, st.Mode&plan9.DMEXCL)
	h.Equal("length of question", uint64(len(question)), st.Length)
}

// where checks that q is listed in dir and in neither of the other two.
func where(fs *client.Fsys, q, dir string) {
	h.Step("check %s is in %s/ only", q, dir)
	for _, d := range []string{"questions", "working", "answers"} {
		names := list(fs, d)
		if d == dir {
			h.In(d, names, q)
		} else {
			h.NotIn(d, names, q)
		}
	}
}
