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
	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"

	h "ninep/interop/internal/harness"
	"ninep/interop/internal/scenario"
)

const user = "interop"

func main() {
	cfg := h.Parse("plan9client")
	nc := h.Dial(cfg.Addr)
	h.Step("Tversion 9P2000")
	conn, err := client.NewConn(nc)
	h.Check(err, "version negotiation")
	h.Step("Tattach as %s", user)
	fs, err := conn.Attach(nil, user, "")
	h.Check(err, "attach")
	switch cfg.Scenario {
	case "ramfs", "export":
		scenario.Ramfs(fsys{fs})
	case "taskbag":
		scenario.Taskbag(fsys{fs}, "plan9")
	}
	h.Step("clunk root and hang up")
	h.Check(fs.Close(), "clunk root")
	conn.Close()
	h.Pass()
}

// fsys does the scenarios' operations with the library's path calls.
type fsys struct{ fs *client.Fsys }

func (s fsys) Create(name string, perm uint32, mode uint8) (scenario.File, error) {
	f, err := s.fs.Create(name, mode, plan9.Perm(perm))
	if err != nil {
		return nil, err
	}
	return file{f}, nil
}

func (s fsys) Open(name string, mode uint8) (scenario.File, error) {
	f, err := s.fs.Open(name, mode)
	if err != nil {
		return nil, err
	}
	return file{f}, nil
}

func (s fsys) Stat(name string) (scenario.Dir, error) {
	return dir(s.fs.Stat(name))
}

func (s fsys) Remove(name string) error {
	return s.fs.Remove(name)
}

// List reads a whole directory and returns its entries' names.
func (s fsys) List(dir string) []string {
	fid, err := s.fs.Open(dir, plan9.OREAD)
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

// Rename renames with a Twstat that changes only the name.
func (s fsys) Rename(name, newName string) {
	var nd plan9.Dir
	nd.Null()
	nd.Name = newName
	h.Check(s.fs.Wstat(name, &nd), "wstat name of %q to %s", name, newName)
}

// Gone takes any error: a 9P2000 Rerror carries only a message.
func (fsys) Gone(err error, format string, args ...any) {
	h.MustFail(err, format, args...)
}

func (fsys) CheckRegular(name string, d scenario.Dir) {
	st := d.Sys.(*plan9.Dir)
	h.Equal("stat mode is a plain file", plan9.Perm(0), st.Mode&plan9.DMDIR)
	h.Equal("stat permission bits", plan9.Perm(0o644), st.Mode&0o777)
	h.Equal("stat qid type", uint8(plan9.QTFILE), st.Qid.Type)
}

func (fsys) CheckExcl(d scenario.Dir) {
	st := d.Sys.(*plan9.Dir)
	h.Equal("DMEXCL in mode of question", plan9.DMEXCL, st.Mode&plan9.DMEXCL)
}

func dir(st *plan9.Dir, err error) (scenario.Dir, error) {
	if err != nil {
		return scenario.Dir{}, err
	}
	return scenario.Dir{Name: st.Name, Length: st.Length, Uid: st.Uid, Sys: st}, nil
}

// file is an open fid; its ReadAt reads all it is asked for.
type file struct{ *client.Fid }

func (f file) ReadAll() []byte {
	return h.ReadAll(f.Fid, 256*1024) // larger than msize: reads take msize-IOHDRSZ
}

func (f file) ReadN(p []byte, off int64) (int, error) {
	return f.Fid.ReadAt(p, off)
}

func (f file) QidType() uint8 {
	return f.Qid().Type
}

func (f file) Stat() (scenario.Dir, error) {
	return dir(f.Fid.Stat())
}
