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
	"os"

	"github.com/lionkov/go9p/p"
	"github.com/lionkov/go9p/p/clnt"

	h "ninep/interop/internal/harness"
	"ninep/interop/internal/scenario"
)

// msize asked for: 8 KiB of data a message, so the payload takes many
// Twrite and Tread messages and the big listing many Treads.
const msize = 8*1024 + p.IOHDRSZ

// user is who the client attaches as: uname "interop", n_uname the uid of
// this process.
type user struct{}

func (user) Name() string          { return "interop" }
func (user) Id() int               { return os.Getuid() }
func (user) Groups() []p.Group     { return nil }
func (user) IsMember(p.Group) bool { return false }

func main() {
	cfg := h.Parse("go9pclient")
	nc := h.Dial(cfg.Addr)
	h.Step("Tversion 9P2000.u (msize %d)", msize)
	c, err := clnt.Connect(nc, msize, true)
	h.Check(err, "version negotiation")
	h.Equal("server agreed to 9P2000.u", true, c.Dotu)
	h.Step("Tattach as %s (n_uname %d)", user{}.Name(), user{}.Id())
	_, err = c.Attach(nil, user{}, "")
	h.Check(err, "attach")
	switch cfg.Scenario {
	case "ramfs", "export":
		scenario.Ramfs(fsys{c})
	case "taskbag":
		scenario.Taskbag(fsys{c}, "go9p")
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

// fsys does the scenarios' operations with the library's path calls.
type fsys struct{ c *clnt.Clnt }

func (s fsys) Create(name string, perm uint32, mode uint8) (scenario.File, error) {
	f, err := s.c.FCreate(name, perm, mode)
	if err != nil {
		return nil, err
	}
	return file{f}, nil
}

func (s fsys) Open(name string, mode uint8) (scenario.File, error) {
	f, err := s.c.FOpen(name, mode)
	if err != nil {
		return nil, err
	}
	return file{f}, nil
}

func (s fsys) Stat(name string) (scenario.Dir, error) {
	return dir(s.c.FStat(name))
}

func (s fsys) Remove(name string) error {
	return s.c.FRemove(name)
}

// List reads a whole directory and returns its entries' names.
func (s fsys) List(dir string) []string {
	f, err := s.c.FOpen(dir, p.OREAD)
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

// Rename renames with a Twstat through a fid walked to name.
func (s fsys) Rename(name, newName string) {
	fid, err := s.c.FWalk(name)
	h.Check(err, "walk %q", name)
	h.Check(s.c.Rename(fid, newName), "wstat name of %q to %s", name, newName)
	h.Check(s.c.Clunk(fid), "clunk renamed fid")
}

// Gone wants the Rerror to carry ENOENT.
func (fsys) Gone(err error, format string, args ...any) {
	mustFailWith(err, p.ENOENT, format, args...)
}

// CheckRegular checks 9P2000.u's extension and numeric owner too.
func (fsys) CheckRegular(name string, d scenario.Dir) {
	st := d.Sys.(*p.Dir)
	h.Equal("stat mode is a plain file", uint32(0), st.Mode&(p.DMDIR|p.DMSYMLINK|p.DMDEVICE|p.DMNAMEDPIPE|p.DMSOCKET))
	h.Equal("stat permission bits", uint32(0o644), st.Mode&0o777)
	h.Equal("stat qid type", uint8(p.QTFILE), st.Qid.Type)
	h.Equal("stat extension of a plain file", "", st.Ext)
	h.Equal("stat n_uid is set", true, st.Uidnum != p.NOUID)
	h.HostOwner(name, st.Uidnum, st.Gidnum)
}

func (fsys) CheckExcl(d scenario.Dir) {
	st := d.Sys.(*p.Dir)
	h.Equal("DMEXCL in mode of question", uint32(p.DMEXCL), st.Mode&p.DMEXCL)
}

// AfterStat checks the error number of a stat of a name that does not
// exist.
func (s fsys) AfterStat(top string) {
	h.Step("stat a name that does not exist in %s", top)
	_, err := s.c.FStat(top + "/nonexistent")
	mustFailWith(err, p.ENOENT, "stat %s/nonexistent", top)
}

// AfterRename makes a symbolic link to top/renamed, in scenario export.
func (s fsys) AfterRename(top string, want []byte) {
	if h.OnHost() {
		s.symlink(top, want)
	}
}

// symlink makes a symbolic link with 9P2000.u's Tcreate (DMSYMLINK, the
// target as extension), checks it over 9P and on the host, and removes it,
// leaving its target (holding want) alone.
func (s fsys) symlink(top string, want []byte) {
	c := s.c
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
	h.SameBytes("content of the link's target after removing the link", want, scenario.ReadFile(s, top+"/renamed"))
	h.HostFile(top+"/renamed", want, 0o644)
}

func dir(st *p.Dir, err error) (scenario.Dir, error) {
	if err != nil {
		return scenario.Dir{}, err
	}
	return scenario.Dir{Name: st.Name, Length: st.Length, Uid: st.Uid, Sys: st}, nil
}

// file is an open file; its ReadN and WriteAt read and write all they are
// asked to, its library's ReadAt one message's worth.
type file struct{ *clnt.File }

func (f file) ReadAll() []byte {
	return h.ReadAll(f.File, 64*1024) // larger than msize: reads take msize-IOHDRSZ
}

func (f file) ReadN(b []byte, off int64) (int, error) {
	return f.Readn(b, uint64(off))
}

func (f file) WriteAt(b []byte, off int64) (int, error) {
	return f.Writen(b, uint64(off))
}

func (f file) QidType() uint8 {
	return f.Fid().Type
}

// Stat stats the file with a Tstat on its open fid.
func (f file) Stat() (scenario.Dir, error) {
	return dir(f.Fid().Clnt.Stat(f.Fid()))
}
