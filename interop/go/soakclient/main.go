// Command soakclient is the soak's independent client: n goroutines, each a
// connection of github.com/hugelgupf/p9 (9P2000.L) working in a directory
// of its own, as the soak's Rust clients do (create, write, read back,
// rename, remove, list, hang up and dial again) until the time is up.
//
//	soakclient -addrs 127.0.0.1:5640,127.0.0.1:5641 -clients 8 -seconds 600 \
//	    -prefix g -manifest FILE
//
// It writes the expected content of every file it kept to the manifest, a
// line each: DIR/NAME SIZE FNV1A64 (hex), and exits 1 at the first wrong
// answer.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hugelgupf/p9/p9"
)

const (
	files   = 8
	maxSize = 96 * 1024
	msize   = 64 * 1024
)

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "soakclient: "+format+"\n", args...)
	os.Exit(1)
}

func check(err error, what string, args ...any) {
	if err != nil {
		fail("%s: %v", fmt.Sprintf(what, args...), err)
	}
}

type soaker struct {
	addr, dir string
	rng       *rand.Rand
	files     map[string][]byte
	next      int
	ops       int
	client    *p9.Client
	root, d   p9.File
}

func (s *soaker) dial() {
	conn, err := net.Dial("tcp", s.addr)
	check(err, "dial %s", s.addr)
	s.client, err = p9.NewClient(conn, p9.WithMessageSize(msize))
	check(err, "version")
	s.root, err = s.client.Attach("")
	check(err, "attach")
	s.root.Mkdir(s.dir, 0o755, p9.NoUID, p9.NoGID) // exists after a redial
	_, s.d, err = s.root.Walk([]string{s.dir})
	check(err, "walk to %s", s.dir)
}

func (s *soaker) hangUp() {
	s.d.Close()
	s.root.Close()
	s.client.Close()
}

func (s *soaker) pick() (string, bool) {
	if len(s.files) == 0 {
		return "", false
	}
	names := s.names()
	return names[s.rng.Intn(len(names))], true
}

func (s *soaker) names() []string {
	names := make([]string, 0, len(s.files))
	for n := range s.files {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (s *soaker) open(name string, flags p9.OpenFlags) p9.File {
	_, f, err := s.d.Walk([]string{name})
	check(err, "walk to %s/%s", s.dir, name)
	_, _, err = f.Open(flags)
	check(err, "open %s/%s", s.dir, name)
	return f
}

func (s *soaker) write(f p9.File, data []byte, off int) {
	for len(data) > 0 {
		n, err := f.WriteAt(data, int64(off))
		check(err, "write")
		if n == 0 {
			fail("write of 0 bytes")
		}
		data, off = data[n:], off+n
	}
}

func (s *soaker) step() {
	s.ops++
	switch op := s.rng.Intn(9); {
	case op < 2 && len(s.files) < files:
		name := fmt.Sprintf("f%d", s.next)
		s.next++
		data := make([]byte, s.rng.Intn(maxSize))
		s.rng.Read(data)
		_, f, err := s.d.Walk(nil)
		check(err, "clone %s", s.dir)
		_, _, _, err = f.Create(name, p9.ReadWrite, 0o644, p9.NoUID, p9.NoGID)
		check(err, "create %s/%s", s.dir, name)
		s.write(f, data, 0)
		check(f.Close(), "clunk")
		s.files[name] = data
	case op < 4:
		name, ok := s.pick()
		if !ok {
			return
		}
		data := make([]byte, s.rng.Intn(16*1024)+1)
		s.rng.Read(data)
		content := s.files[name]
		off := s.rng.Intn(len(content) + 1)
		f := s.open(name, p9.ReadWrite)
		s.write(f, data, off)
		check(f.Close(), "clunk")
		if len(content) < off+len(data) {
			content = append(content, make([]byte, off+len(data)-len(content))...)
		}
		copy(content[off:], data)
		s.files[name] = content
	case op < 6:
		name, ok := s.pick()
		if !ok {
			return
		}
		f := s.open(name, p9.ReadOnly)
		var got []byte
		buf := make([]byte, 32*1024)
		for {
			n, err := f.ReadAt(buf, int64(len(got)))
			got = append(got, buf[:n]...)
			if err == io.EOF || (err == nil && n == 0) {
				break
			}
			check(err, "read %s/%s", s.dir, name)
		}
		check(f.Close(), "clunk")
		if !bytes.Equal(got, s.files[name]) {
			fail("%s/%s reads back wrong: %d bytes, want %d", s.dir, name, len(got), len(s.files[name]))
		}
	case op == 6:
		name, ok := s.pick()
		if !ok {
			return
		}
		to := fmt.Sprintf("f%d", s.next)
		s.next++
		check(s.d.RenameAt(name, s.d, to), "rename %s/%s to %s", s.dir, name, to)
		s.files[to] = s.files[name]
		delete(s.files, name)
	case op == 7:
		name, ok := s.pick()
		if !ok {
			return
		}
		check(s.d.UnlinkAt(name, 0), "remove %s/%s", s.dir, name)
		delete(s.files, name)
	default:
		_, f, err := s.d.Walk(nil)
		check(err, "clone %s", s.dir)
		_, _, err = f.Open(p9.ReadOnly)
		check(err, "open %s", s.dir)
		var got []string
		var off uint64
		for {
			ents, err := f.Readdir(off, msize-64)
			check(err, "readdir %s", s.dir)
			if len(ents) == 0 {
				break
			}
			for _, e := range ents {
				if e.Name != "." && e.Name != ".." {
					got = append(got, e.Name)
				}
				off = e.Offset
			}
		}
		check(f.Close(), "clunk")
		sort.Strings(got)
		if want := s.names(); strings.Join(got, " ") != strings.Join(want, " ") {
			fail("%s lists %v, want %v", s.dir, got, want)
		}
	}
}

func main() {
	addrs := flag.String("addrs", "", "server addresses, comma separated")
	clients := flag.Int("clients", 8, "connections")
	seconds := flag.Int("seconds", 60, "how long")
	prefix := flag.String("prefix", "g", "directory name prefix")
	manifest := flag.String("manifest", "", "file to write the manifest to")
	flag.Parse()
	list := strings.Split(*addrs, ",")
	until := time.Now().Add(time.Duration(*seconds) * time.Second)
	soakers := make([]*soaker, *clients)
	var wg sync.WaitGroup
	for i := range soakers {
		s := &soaker{
			addr:  list[i%len(list)],
			dir:   fmt.Sprintf("%s%d", *prefix, i),
			rng:   rand.New(rand.NewSource(int64(i + 1))),
			files: map[string][]byte{},
		}
		soakers[i] = s
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.dial()
			for time.Now().Before(until) {
				if s.rng.Intn(200) == 0 {
					s.hangUp()
					s.dial()
				}
				s.step()
			}
			s.hangUp()
		}()
	}
	wg.Wait()
	var out strings.Builder
	ops := 0
	for _, s := range soakers {
		ops += s.ops
		for _, name := range s.names() {
			h := fnv.New64a()
			h.Write(s.files[name])
			fmt.Fprintf(&out, "%s/%s %d %016x\n", s.dir, name, len(s.files[name]), h.Sum64())
		}
	}
	check(os.WriteFile(*manifest, []byte(out.String()), 0o644), "write manifest")
	fmt.Printf("soakclient: %d clients, %d operations\n", *clients, ops)
}
