// Command go9pclient drives a 9P2000.u server with github.com/lionkov/go9p
// (package p/clnt, with dotu set).
//
//	go9pclient -addr 127.0.0.1:5640 -scenario ramfs|taskbag
//	go9pclient -addr 127.0.0.1:5640 -scenario export -hostdir DIR
//
// Scenario export is scenario ramfs against 'ninep serve DIR' on this
// machine, with each step also checked on the host in DIR, and a symbolic
// link made with 9P2000.u's DMSYMLINK.
//
// It exits 0 after printing PASS, or 1 at the first failed check, saying
// what was expected and what came back.
package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"sync"

	"github.com/lionkov/go9p/p"
	"github.com/lionkov/go9p/p/clnt"

	h "ninep/interop/internal/harness"
)

const (
	payloadSize = 300 * 1024
	manyFiles   = 10000
	parallel    = 8
	// msize asked for: 8 KiB of data a message, so the payload takes many
	// Twrite and Tread messages and the big listing many Treads.
	msize = 8*1024 + p.IOHDRSZ
)

// user is who the client attaches as: uname "interop", n_uname the uid of
// this process.
type user struct{}

func (user) Name() string          { return "interop" }
func (user) Id() int               { return os.Getuid() }
func (user) Groups() []p.Group     { return nil }
func (user) IsMember(p.Group) bool { return false }

func main() {
	cfg := h.Parse("go9pclient")
	h.Step("dial %s", cfg.Addr)
	nc, err := net.Dial("tcp", cfg.Addr)
	h.Check(err, "dial %s", cfg.Addr)
	h.Step("Tversion 9P2000.u (msize %d)", msize)
	c, err := clnt.Connect(nc, msize, true)
	h.Check(err, "version negotiation")
	h.Equal("server agreed to 9P2000.u", true, c.Dotu)
	h.Step("Tattach as %s (n_uname %d)", user{}.Name(), user{}.Id())
	_, err = c.Attach(nil, user{}, "")
	h.Check(err, "attach")
	switch cfg.Scenario {
	case "ramfs", "export":
		ramfs(c)
	case "taskbag":
		taskbag(c)
	}
	h.Step("clunk root and hang up")
	h.Check(c.Clunk(c.Root), "clunk root")
	c.Unmount()
	h.Pass()
}

// errno is the error number a 9P2000.u Rerror carried, or 0.
func errno(err error) uint32 {
	var e *p.Error
	if errors.As(err, &e) {
		return e.Errornum
	}
	return 0
}

// mustFailWith fails unless err is an error carrying errno want.
func mustFailWith(err error, want uint32, format string, args ...any) {
	h.MustFail(err, format, args...)
	h.Equal(fmt.Sprintf(format, args...)+": errno of the Rerror", want, errno(err))
}

// list reads a whole directory and returns its entries' names.
func list(c *clnt.Clnt, dir string) []string {
	f, err := c.FOpen(dir, p.OREAD)
	h.Check(err, "open directory %q for reading", dir)
	defer f.Close()
	dirs, err := f.Readdir(0)
	if !errors.Is(err, io.EOF) {
		h.Check(err, "read directory %q", dir)
	}
	names := make([]string, len(dirs))
	for i, d := range dirs {
		names[i] = d.Name
	}
	return names
}

// readAll reads a file from offset 0 to end of file through an open file.
func readAll(f *clnt.File) []byte {
	var out []byte
	buf := make([]byte, 64*1024) // larger than msize: reads take msize-IOHDRSZ
	for off := int64(0); ; {
		n, err := f.ReadAt(buf, off)
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

func readFile(c *clnt.Clnt, name string) []byte {
	f, err := c.FOpen(name, p.OREAD)
	h.Check(err, "open %q for reading", name)
	defer f.Close()
	return readAll(f)
}

func writeAll(f *clnt.File, data []byte, off uint64, what string) {
	n, err := f.Writen(data, off)
	h.Check(err, "write %s (%d bytes at offset %d)", what, len(data), off)
	h.Equal("bytes written of "+what, len(data), n)
}

func ramfs(c *clnt.Clnt) {
	top := h.Unique("go9pclient")

	h.Step("create directory %s", top)
	d, err := c.FCreate(top, p.DMDIR|0o755, p.OREAD)
	h.Check(err, "create directory %q", top)
	h.Equal("qid type of new directory has QTDIR", true, d.Fid().Type&p.QTDIR != 0)
	h.Check(d.Close(), "clunk new directory")
	h.HostIsDir(top)

	data := top + "/data"
	payload := h.Payload(payloadSize)
	h.Step("create %s and write %d bytes", data, len(payload))
	f, err := c.FCreate(data, 0o644, p.ORDWR)
	h.Check(err, "create %q", data)
	head := []byte("hello, 9P\n")
	writeAll(f, head, 0, "header")
	writeAll(f, payload, uint64(len(head)), "payload")
	want := append(append([]byte{}, head...), payload...)

	h.Step("read back %s through the fid that created it", data)
	h.SameBytes("content read through creating fid", want, readAll(f))
	h.Step("read 5000 bytes at offset 100003 of %s", data)
	mid := make([]byte, 5000)
	n, err := f.Readn(mid, 100003)
	h.Check(err, "read 5000 bytes at offset 100003")
	h.Equal("bytes read at offset 100003", len(mid), n)
	h.SameBytes("content at offset 100003", want[100003:105003], mid)
	h.Step("stat %s through the open fid", data)
	st, err := c.Stat(f.Fid())
	h.Check(err, "stat open fid")
	h.Equal("length from Tstat on open fid", uint64(len(want)), st.Length)
	h.Check(f.Close(), "clunk %q", data)
	h.HostFile(data, want, 0o644)

	h.Step("read back %s through a new fid", data)
	h.SameBytes("content read through new fid", want, readFile(c, data))

	h.Step("stat %s", data)
	st, err = c.FStat(data)
	h.Check(err, "stat %q", data)
	h.Equal("stat name", "data", st.Name)
	h.Equal("stat length", uint64(len(want)), st.Length)
	h.Equal("stat mode is a plain file", uint32(0), st.Mode&(p.DMDIR|p.DMSYMLINK|p.DMDEVICE|p.DMNAMEDPIPE|p.DMSOCKET))
	h.Equal("stat permission bits", uint32(0o644), st.Mode&0o777)
	h.Equal("stat qid type", uint8(p.QTFILE), st.Qid.Type)
	h.Equal("stat extension of a plain file", "", st.Ext)
	h.Equal("stat n_uid is set", true, st.Uidnum != p.NOUID)
	h.HostOwner(data, st.Uidnum, st.Gidnum)
	h.HostOwnerName(data, st.Uid)

	h.Step("stat a name that does not exist in %s", top)
	_, err = c.FStat(top + "/nonexistent")
	mustFailWith(err, p.ENOENT, "stat %s/nonexistent", top)

	h.Step("rename %s to renamed with Twstat", data)
	fid, err := c.FWalk(data)
	h.Check(err, "walk %q", data)
	h.Check(c.Rename(fid, "renamed"), "wstat name of %q to renamed", data)
	h.Check(c.Clunk(fid), "clunk renamed fid")
	renamed := top + "/renamed"
	h.Step("check the old name %s is gone", data)
	_, err = c.FStat(data)
	mustFailWith(err, p.ENOENT, "stat old name %q after rename", data)
	h.Step("check the new name %s is present", renamed)
	st, err = c.FStat(renamed)
	h.Check(err, "stat new name %q after rename", renamed)
	h.Equal("stat name after rename", "renamed", st.Name)
	h.Equal("stat length after rename", uint64(len(want)), st.Length)
	h.ExactlyOnce("listing of "+top+" after rename", []string{"renamed"}, list(c, top))
	h.SameBytes("content after rename", want, readFile(c, renamed))
	h.HostAbsent(data)
	h.HostFile(renamed, want, 0o644)

	if h.OnHost() {
		symlink(c, top, want)
	}

	h.Step("remove %s", renamed)
	h.Check(c.FRemove(renamed), "remove %q", renamed)
	_, err = c.FStat(renamed)
	mustFailWith(err, p.ENOENT, "stat %q after remove", renamed)
	h.ExactlyOnce("listing of "+top+" after remove", nil, list(c, top))
	h.HostAbsent(renamed)
	h.HostListing(top, nil)

	many := top + "/many"
	h.Step("create directory %s", many)
	d, err = c.FCreate(many, p.DMDIR|0o755, p.OREAD)
	h.Check(err, "create directory %q", many)
	h.Check(d.Close(), "clunk %q", many)

	want10k := h.ManyNames(manyFiles)
	h.Step("create %d empty files in %s", manyFiles, many)
	each(want10k, func(name string) error {
		f, err := c.FCreate(many+"/"+name, 0o644, p.OWRITE)
		if err != nil {
			return fmt.Errorf("create %s/%s: %w", many, name, err)
		}
		return f.Close()
	})

	h.Step("list %s", many)
	h.ExactlyOnce("listing of "+many, want10k, list(c, many))
	h.HostListing(many, want10k)
	h.Step("stat %s/%s", many, want10k[manyFiles-1])
	st, err = c.FStat(many + "/" + want10k[manyFiles-1])
	h.Check(err, "stat last file")
	h.Equal("length of empty file", uint64(0), st.Length)

	h.Step("remove the %d files of %s", manyFiles, many)
	each(want10k, func(name string) error {
		if err := c.FRemove(many + "/" + name); err != nil {
			return fmt.Errorf("remove %s/%s: %w", many, name, err)
		}
		return nil
	})
	h.Step("list %s after removing its files", many)
	h.ExactlyOnce("listing of "+many+" after removing all", nil, list(c, many))
	h.HostListing(many, nil)

	h.Step("remove %s and %s", many, top)
	h.Check(c.FRemove(many), "remove %q", many)
	h.Check(c.FRemove(top), "remove %q", top)
	h.NotIn("/", list(c, "/"), top)
	h.HostAbsent(top)
}

// symlink makes a symbolic link with 9P2000.u's Tcreate (DMSYMLINK, the
// target as extension), checks it over 9P and on the host, and removes it,
// leaving its target (holding want) alone.
func symlink(c *clnt.Clnt, top string, want []byte) {
	link := top + "/link"
	h.Step("create symbolic link %s -> renamed", link)
	fid, err := c.FWalk(top)
	h.Check(err, "walk %q", top)
	h.Check(c.Create(fid, "link", p.DMSYMLINK|0o777, p.OREAD, "renamed"), "create symlink %q", link)
	h.Equal("qid type of new link has QTSYMLINK", true, fid.Type&p.QTSYMLINK != 0)
	h.Check(c.Clunk(fid), "clunk %q", link)
	h.Step("stat %s", link)
	st, err := c.FStat(link)
	h.Check(err, "stat %q", link)
	h.Equal("stat mode of link has DMSYMLINK", uint32(p.DMSYMLINK), st.Mode&p.DMSYMLINK)
	h.Equal("stat extension of link (its target)", "renamed", st.Ext)
	h.Step("check %s on the host", link)
	target, err := os.Readlink(h.HostPath(link))
	h.Check(err, "readlink %s on the host", h.HostPath(link))
	h.Equal("target of the link on the host", "renamed", target)
	h.Step("remove %s", link)
	h.Check(c.FRemove(link), "remove %q", link)
	h.HostAbsent(link)
	h.Step("check the target %s/renamed is untouched", top)
	h.SameBytes("content of the link's target after removing the link", want, readFile(c, top+"/renamed"))
	h.HostFile(top+"/renamed", want, 0o644)
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

func taskbag(c *clnt.Clnt) {
	h.Step("list the root")
	root := list(c, "/")
	sort.Strings(root)
	for _, d := range []string{"answers", "questions", "working"} {
		h.In("/", root, d)
	}

	// A question answered.
	q := h.Unique("q-go9p")
	question := []byte("What is the answer to " + q + "?\n")
	answer := []byte("42, says go9pclient.\n")
	ask(c, q, question)

	h.Step("worker opens questions/%s ORDWR", q)
	w, err := c.FOpen("questions/"+q, p.ORDWR)
	h.Check(err, "open questions/%s ORDWR", q)
	where(c, q, "working")
	h.Step("a second open of working/%s while the worker has it", q)
	other, err := c.FOpen("working/"+q, p.OREAD)
	if err == nil {
		other.Close()
	}
	h.MustFail(err, "open of exclusive-use working/%s while the worker has it open", q)
	h.Step("worker reads the question of %s", q)
	h.SameBytes("question read by worker", question, readAll(w))
	h.Step("worker writes the answer to %s", q)
	writeAll(w, answer, uint64(len(question)), "answer")
	h.Step("worker closes %s after writing", q)
	h.Check(w.Close(), "clunk worker fid")
	where(c, q, "answers")
	h.Step("read answers/%s", q)
	h.SameBytes("content of answers/"+q, append(append([]byte{}, question...), answer...), readFile(c, "answers/"+q))

	// A question given up on.
	q2 := h.Unique("q-go9p-giveup")
	question2 := []byte("Will anyone answer " + q2 + "?\n")
	ask(c, q2, question2)
	h.Step("worker opens questions/%s ORDWR", q2)
	w, err = c.FOpen("questions/"+q2, p.ORDWR)
	h.Check(err, "open questions/%s ORDWR", q2)
	where(c, q2, "working")
	h.Step("worker closes %s without writing", q2)
	h.Check(w.Close(), "clunk worker fid")
	where(c, q2, "questions")
	h.Step("read questions/%s after the worker gave up", q2)
	h.SameBytes("content of returned question", question2, readFile(c, "questions/"+q2))

	h.Step("clean up answers/%s and questions/%s", q, q2)
	h.Check(c.FRemove("answers/"+q), "remove answers/%s", q)
	h.Check(c.FRemove("questions/"+q2), "remove questions/%s", q2)
	h.NotIn("answers", list(c, "answers"), q)
	h.NotIn("questions", list(c, "questions"), q2)
}

// ask creates questions/q, writes question and closes it, and checks that
// it is listed in questions as an exclusive-use file.
func ask(c *clnt.Clnt, q string, question []byte) {
	h.Step("create questions/%s", q)
	f, err := c.FCreate("questions/"+q, 0o666, p.OWRITE)
	h.Check(err, "create questions/%s", q)
	h.Equal("qid type of new question has QTEXCL", true, f.Fid().Type&p.QTEXCL != 0)
	writeAll(f, question, 0, "question")
	h.Check(f.Close(), "clunk questions/%s", q)
	where(c, q, "questions")
	h.Step("stat questions/%s", q)
	st, err := c.FStat("questions/" + q)
	h.Check(err, "stat questions/%s", q)
	h.Equal("DMEXCL in mode of question", uint32(p.DMEXCL), st.Mode&p.DMEXCL)
	h.Equal("length of question", uint64(len(question)), st.Length)
}

// where checks that q is listed in dir and in neither of the other two.
func where(c *clnt.Clnt, q, dir string) {
	h.Step("check %s is in %s/ only", q, dir)
	for _, d := range []string{"questions", "working", "answers"} {
		names := list(c, d)
		if d == dir {
			h.In(d, names, q)
		} else {
			h.NotIn(d, names, q)
		}
	}
}
