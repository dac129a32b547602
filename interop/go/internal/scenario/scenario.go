// Package scenario holds the ramfs and taskbag scenarios of the clients
// that name files by path from the root they attached to and speak 9P2000
// or 9P2000.u (plan9client, go9pclient). Each such client says how its
// library does the operations, by implementing FS; the scenarios do the
// rest. Where, CheckTaskbagRoot and ReadFile serve the clients too.
package scenario

import (
	"fmt"
	"sort"

	h "ninep/interop/internal/harness"
)

// 9P2000 numbers the scenarios use, the same in every client library.
const (
	oREAD  = 0
	oWRITE = 1
	oRDWR  = 2
	dmDIR  = 0x80000000
	qtDIR  = 0x80
	qtEXCL = 0x20
)

// FS is a client library's way of doing what the scenarios need. Names are
// paths from the root the client attached to.
type FS interface {
	// Create creates name with permissions perm (a 9P2000 mode: DMDIR for
	// a directory) and opens it with mode (OREAD, OWRITE or ORDWR).
	Create(name string, perm uint32, mode uint8) (File, error)
	// Open opens name with mode.
	Open(name string, mode uint8) (File, error)
	// Stat stats name.
	Stat(name string) (Dir, error)
	// Remove removes name.
	Remove(name string) error
	// List reads the whole directory dir and returns its entries' names;
	// it fails the run on an error.
	List(dir string) []string
	// Rename gives name the name newName in the same directory; it fails
	// the run on an error.
	Rename(name, newName string)
	// Gone fails the run unless err is an error, of the kind the library
	// reports for a name that does not exist; format and args say what
	// failed to fail.
	Gone(err error, format string, args ...any)
	// CheckRegular checks what st, the stat of name, says of its type,
	// permission bits (0o644) and owner, past its name and length.
	CheckRegular(name string, st Dir)
	// CheckExcl checks that st, the stat of a file, marks it exclusive-use.
	CheckExcl(st Dir)
}

// AfterStater is an FS with checks of its own for scenario ramfs to run
// after it checked the stat of top/data.
type AfterStater interface {
	AfterStat(top string)
}

// AfterRenamer is an FS with checks of its own for scenario ramfs to run
// after it renamed top/data, holding want, to top/renamed.
type AfterRenamer interface {
	AfterRename(top string, want []byte)
}

// File is a file open through FS.
type File interface {
	// ReadAll reads the file from offset 0 to end of file; it fails the
	// run on an error.
	ReadAll() []byte
	// ReadN reads len(p) bytes at off, with as many reads as it takes.
	ReadN(p []byte, off int64) (int, error)
	// WriteAt writes all of p at off.
	WriteAt(p []byte, off int64) (int, error)
	// QidType is the type of the file's qid.
	QidType() uint8
	// Stat stats the file through its open fid.
	Stat() (Dir, error)
	// Close clunks the fid.
	Close() error
}

// Dir is what the scenarios read of a stat.
type Dir struct {
	Name   string
	Length uint64
	Uid    string
	// Sys is the library's own stat, for FS's checks.
	Sys any
}

// ReadFile opens name for reading and reads all of it.
func ReadFile(fs FS, name string) []byte {
	f, err := fs.Open(name, oREAD)
	h.Check(err, "open %q for reading", name)
	defer f.Close()
	return f.ReadAll()
}

// Ramfs is scenario ramfs (and export): a directory with a big file,
// renamed and removed, and a directory of many files, all made and taken
// away again, each step checked over 9P and (scenario export) on the host.
func Ramfs(fs FS) {
	top := h.Unique(h.Client())

	h.Step("create directory %s", top)
	d, err := fs.Create(top, dmDIR|0o755, oREAD)
	h.Check(err, "create directory %q", top)
	h.Equal("qid type of new directory has QTDIR", true, d.QidType()&qtDIR != 0)
	h.Check(d.Close(), "clunk new directory")
	h.HostIsDir(top)

	// A file written with a payload much larger than the msize of the
	// client, so the write and the read take several messages.
	data := top + "/data"
	payload := h.Payload(h.PayloadSize)
	h.Step("create %s and write %d bytes", data, len(payload))
	f, err := fs.Create(data, 0o644, oRDWR)
	h.Check(err, "create %q", data)
	head := []byte("hello, 9P\n")
	h.WriteAll(f, head, 0, "header")
	h.WriteAll(f, payload, int64(len(head)), "payload")
	want := append(append([]byte{}, head...), payload...)

	h.Step("read back %s through the fid that created it", data)
	h.SameBytes("content read through creating fid", want, f.ReadAll())
	h.Step("read 5000 bytes at offset 100003 of %s", data)
	mid := make([]byte, 5000)
	n, err := f.ReadN(mid, 100003)
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
	h.SameBytes("content read through new fid", want, ReadFile(fs, data))

	h.Step("stat %s", data)
	st, err = fs.Stat(data)
	h.Check(err, "stat %q", data)
	h.Equal("stat name", "data", st.Name)
	h.Equal("stat length", uint64(len(want)), st.Length)
	fs.CheckRegular(data, st)
	h.HostOwnerName(data, st.Uid)
	if x, ok := fs.(AfterStater); ok {
		x.AfterStat(top)
	}

	h.Step("rename %s to renamed with Twstat", data)
	fs.Rename(data, "renamed")
	renamed := top + "/renamed"
	h.Step("check the old name %s is gone", data)
	_, err = fs.Stat(data)
	fs.Gone(err, "stat old name %q after rename", data)
	h.Step("check the new name %s is present", renamed)
	st, err = fs.Stat(renamed)
	h.Check(err, "stat new name %q after rename", renamed)
	h.Equal("stat name after rename", "renamed", st.Name)
	h.Equal("stat length after rename", uint64(len(want)), st.Length)
	h.ExactlyOnce("listing of "+top+" after rename", []string{"renamed"}, fs.List(top))
	h.SameBytes("content after rename", want, ReadFile(fs, renamed))
	h.HostAbsent(data)
	h.HostFile(renamed, want, 0o644)
	if x, ok := fs.(AfterRenamer); ok {
		x.AfterRename(top, want)
	}

	h.Step("remove %s", renamed)
	h.Check(fs.Remove(renamed), "remove %q", renamed)
	_, err = fs.Stat(renamed)
	fs.Gone(err, "stat %q after remove", renamed)
	h.ExactlyOnce("listing of "+top+" after remove", nil, fs.List(top))
	h.HostAbsent(renamed)
	h.HostListing(top, nil)

	many := top + "/many"
	h.Step("create directory %s", many)
	d, err = fs.Create(many, dmDIR|0o755, oREAD)
	h.Check(err, "create directory %q", many)
	h.Check(d.Close(), "clunk %q", many)

	want10k := h.ManyNames(h.ManyFiles)
	h.Step("create %d empty files in %s", h.ManyFiles, many)
	h.Each(want10k, func(name string) error {
		f, err := fs.Create(many+"/"+name, 0o644, oWRITE)
		if err != nil {
			return fmt.Errorf("create %s/%s: %w", many, name, err)
		}
		return f.Close()
	})

	h.Step("list %s", many)
	h.ExactlyOnce("listing of "+many, want10k, fs.List(many))
	h.HostListing(many, want10k)
	h.Step("stat %s/%s", many, want10k[h.ManyFiles-1])
	st, err = fs.Stat(many + "/" + want10k[h.ManyFiles-1])
	h.Check(err, "stat last file")
	h.Equal("length of empty file", uint64(0), st.Length)

	h.Step("remove the %d files of %s", h.ManyFiles, many)
	h.Each(want10k, func(name string) error {
		if err := fs.Remove(many + "/" + name); err != nil {
			return fmt.Errorf("remove %s/%s: %w", many, name, err)
		}
		return nil
	})
	h.Step("list %s after removing its files", many)
	h.ExactlyOnce("listing of "+many+" after removing all", nil, fs.List(many))
	h.HostListing(many, nil)

	h.Step("remove %s and %s", many, top)
	h.Check(fs.Remove(many), "remove %q", many)
	h.Check(fs.Remove(top), "remove %q", top)
	h.NotIn("/", fs.List("/"), top)
	h.HostAbsent(top)
}

// Taskbag is scenario taskbag: a question answered and a question given up
// on, checking at each step which of questions, working and answers holds
// it. tag goes into the questions' names.
func Taskbag(fs FS, tag string) {
	h.Step("list the root")
	root := fs.List("/")
	sort.Strings(root)
	CheckTaskbagRoot(root)

	// A question answered.
	q := h.Unique("q-" + tag)
	question := []byte("What is the answer to " + q + "?\n")
	answer := []byte("42, says " + h.Client() + ".\n")
	ask(fs, q, question)

	h.Step("worker opens questions/%s ORDWR", q)
	w, err := fs.Open("questions/"+q, oRDWR)
	h.Check(err, "open questions/%s ORDWR", q)
	Where(fs.List, q, "working")
	h.Step("a second open of working/%s while the worker has it", q)
	other, err := fs.Open("working/"+q, oREAD)
	if err == nil {
		other.Close()
	}
	h.MustFail(err, "open of exclusive-use working/%s while the worker has it open", q)
	h.Step("worker reads the question of %s", q)
	h.SameBytes("question read by worker", question, w.ReadAll())
	h.Step("worker writes the answer to %s", q)
	h.WriteAll(w, answer, int64(len(question)), "answer")
	h.Step("worker closes %s after writing", q)
	h.Check(w.Close(), "clunk worker fid")
	Where(fs.List, q, "answers")
	h.Step("read answers/%s", q)
	h.SameBytes("content of answers/"+q, append(append([]byte{}, question...), answer...), ReadFile(fs, "answers/"+q))

	// A question given up on.
	q2 := h.Unique("q-" + tag + "-giveup")
	question2 := []byte("Will anyone answer " + q2 + "?\n")
	ask(fs, q2, question2)
	h.Step("worker opens questions/%s ORDWR", q2)
	w, err = fs.Open("questions/"+q2, oRDWR)
	h.Check(err, "open questions/%s ORDWR", q2)
	Where(fs.List, q2, "working")
	h.Step("worker closes %s without writing", q2)
	h.Check(w.Close(), "clunk worker fid")
	Where(fs.List, q2, "questions")
	h.Step("read questions/%s after the worker gave up", q2)
	h.SameBytes("content of returned question", question2, ReadFile(fs, "questions/"+q2))

	h.Step("clean up answers/%s and questions/%s", q, q2)
	h.Check(fs.Remove("answers/"+q), "remove answers/%s", q)
	h.Check(fs.Remove("questions/"+q2), "remove questions/%s", q2)
	h.NotIn("answers", fs.List("answers"), q)
	h.NotIn("questions", fs.List("questions"), q2)
}

// ask creates questions/q, writes question and closes it, and checks that
// it is listed in questions as an exclusive-use file.
func ask(fs FS, q string, question []byte) {
	h.Step("create questions/%s", q)
	f, err := fs.Create("questions/"+q, 0o666, oWRITE)
	h.Check(err, "create questions/%s", q)
	h.Equal("qid type of new question has QTEXCL", true, f.QidType()&qtEXCL != 0)
	h.WriteAll(f, question, 0, "question")
	h.Check(f.Close(), "clunk questions/%s", q)
	Where(fs.List, q, "questions")
	h.Step("stat questions/%s", q)
	st, err := fs.Stat("questions/" + q)
	h.Check(err, "stat questions/%s", q)
	fs.CheckExcl(st)
	h.Equal("length of question", uint64(len(question)), st.Length)
}

// CheckTaskbagRoot fails unless names, the listing of a taskbag's root,
// holds its three directories.
func CheckTaskbagRoot(names []string) {
	for _, d := range []string{"answers", "questions", "working"} {
		h.In("/", names, d)
	}
}

// Where checks that q is listed in directory dir and in neither of the
// other two of a taskbag; list reads a directory of the root.
func Where(list func(dir string) []string, q, dir string) {
	h.Step("check %s is in %s/ only", q, dir)
	for _, d := range []string{"questions", "working", "answers"} {
		names := list(d)
		if d == dir {
			h.In(d, names, q)
		} else {
			h.NotIn(d, names, q)
		}
	}
}
