package harness

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
)

// The export scenario is the ramfs scenario run against 'ninep serve DIR'
// on this machine. The checks below look straight at DIR on the host, to
// see that what the client did over 9P happened there. Each is a no-op in
// the other scenarios, so a client calls them unconditionally.

// OnHost reports whether the server exports a host directory this client
// can see (scenario export).
func OnHost() bool {
	return hostDir != ""
}

// hostStep names a host check as the current step until it returns.
func hostStep(what, rel string) func() {
	saved := step
	Step("check on the host that %s %s", hostPath(rel), what)
	return func() { step = saved }
}

// HostPath is where rel (relative to the exported directory) is on the host.
func HostPath(rel string) string {
	return hostPath(rel)
}

func hostPath(rel string) string {
	return filepath.Join(hostDir, filepath.FromSlash(rel))
}

func hostLstat(rel string) (fs.FileInfo, *syscall.Stat_t) {
	fi, err := os.Lstat(hostPath(rel))
	Check(err, "lstat %s on the host", hostPath(rel))
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		Failf("lstat %s on the host: expected a syscall.Stat_t, got %T", hostPath(rel), fi.Sys())
	}
	return fi, st
}

// HostIsDir fails unless rel is a directory on the host.
func HostIsDir(rel string) {
	if !OnHost() {
		return
	}
	defer hostStep("is a directory", rel)()
	fi, _ := hostLstat(rel)
	Equal("host file type of "+hostPath(rel), fs.ModeDir, fi.Mode().Type())
}

// HostFile fails unless rel is a regular file on the host holding want,
// with permission bits perm.
func HostFile(rel string, want []byte, perm uint32) {
	if !OnHost() {
		return
	}
	defer hostStep("holds what was written", rel)()
	fi, _ := hostLstat(rel)
	Equal("host file type of "+hostPath(rel), fs.FileMode(0), fi.Mode().Type())
	Equal("host permission bits of "+hostPath(rel), fmt.Sprintf("%#o", perm), fmt.Sprintf("%#o", uint32(fi.Mode().Perm())))
	b, err := os.ReadFile(hostPath(rel))
	Check(err, "read %s on the host", hostPath(rel))
	SameBytes("content of "+hostPath(rel)+" on the host", want, b)
}

// HostOwner fails unless the host's numeric owner and group of rel are
// uid and gid (as 9P2000.u and .L report them).
func HostOwner(rel string, uid, gid uint32) {
	if !OnHost() {
		return
	}
	defer hostStep("has the owner reported over 9P", rel)()
	_, st := hostLstat(rel)
	Equal("host uid of "+hostPath(rel)+" (reported over 9P)", uid, st.Uid)
	Equal("host gid of "+hostPath(rel)+" (reported over 9P)", gid, st.Gid)
}

// HostOwnerName fails unless the host's owner of rel is called uname (as
// 9P2000 reports it): its name in the password file, else its number.
func HostOwnerName(rel string, uname string) {
	if !OnHost() {
		return
	}
	defer hostStep("has the owner reported over 9P", rel)()
	_, st := hostLstat(rel)
	host := strconv.FormatUint(uint64(st.Uid), 10)
	if u, err := user.LookupId(host); err == nil {
		host = u.Username
	}
	Equal("host owner of "+hostPath(rel)+" (reported over 9P)", uname, host)
}

// HostAbsent fails unless rel is gone from the host.
func HostAbsent(rel string) {
	if !OnHost() {
		return
	}
	defer hostStep("is gone", rel)()
	_, err := os.Lstat(hostPath(rel))
	if !errors.Is(err, fs.ErrNotExist) {
		Failf("lstat %s on the host: expected it not to exist, got error %v", hostPath(rel), err)
	}
}

// HostListing fails unless directory rel holds exactly want on the host.
func HostListing(rel string, want []string) {
	if !OnHost() {
		return
	}
	defer hostStep("lists as expected", rel)()
	ents, err := os.ReadDir(hostPath(rel))
	Check(err, "read directory %s on the host", hostPath(rel))
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	ExactlyOnce("host listing of "+hostPath(rel), want, names)
}
