// Package harness holds what the interop clients share: flags, failure
// reporting, unique names and payloads, and reading, writing and looping
// helpers that work with any client library.
package harness

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
)

// ExitTimeout is the exit status of a client that ran out of time; any
// other failure exits 1.
const ExitTimeout = 3

const (
	// PayloadSize is the size of the big file of scenario ramfs.
	PayloadSize = 300 * 1024
	// ManyFiles is the number of files in the big directory of scenario
	// ramfs.
	ManyFiles = 10000
	// parallel is how many calls Each makes at once.
	parallel = 8
)

// Config is what a client is told on its command line.
type Config struct {
	Addr     string
	Scenario string
	Timeout  time.Duration
	// HostDir is the host directory the server exports (scenario export).
	HostDir string
}

var (
	client   string
	scenario string
	step     string
	hostDir  string
	// tlsCA, tlsCert and tlsKey make Dial speak TLS (Go's own crypto/tls):
	// the server is checked against tlsCA, and tlsCert proves the client.
	tlsCA, tlsCert, tlsKey string
)

// Parse reads -addr, -scenario, -timeout, (for scenario export) -hostdir
// and (for TLS) -tls-ca, -tls-cert and -tls-key; name is the client's name
// for messages.
func Parse(name string) Config {
	client = name
	var c Config
	flag.StringVar(&c.Addr, "addr", "", "server address, host:port")
	flag.StringVar(&c.Scenario, "scenario", "", "ramfs, taskbag or export")
	flag.DurationVar(&c.Timeout, "timeout", 90*time.Second, "give up after this long")
	flag.StringVar(&c.HostDir, "hostdir", "", "for scenario export: the host directory the server exports")
	flag.StringVar(&tlsCA, "tls-ca", "", "dial over TLS, trusting the server certificates this CA signed (PEM)")
	flag.StringVar(&tlsCert, "tls-cert", "", "with -tls-ca: the client certificate (PEM)")
	flag.StringVar(&tlsKey, "tls-key", "", "with -tls-cert: its private key (PEM)")
	flag.Parse()
	known := c.Scenario == "ramfs" || c.Scenario == "taskbag" || c.Scenario == "export"
	if c.Addr == "" || !known || (c.Scenario == "export") != (c.HostDir != "") || flag.NArg() != 0 {
		fmt.Fprintf(os.Stderr, "usage: %s -addr host:port -scenario ramfs|taskbag\n", name)
		fmt.Fprintf(os.Stderr, "       %s -addr host:port -scenario export -hostdir DIR\n", name)
		os.Exit(2)
	}
	scenario = c.Scenario
	hostDir = c.HostDir
	if c.Timeout > 0 {
		time.AfterFunc(c.Timeout, func() {
			fmt.Fprintf(os.Stderr, "FAIL %s/%s: step %q: timed out after %v\n", client, scenario, step, c.Timeout)
			os.Exit(ExitTimeout)
		})
	}
	return c
}

// Client is the client's name, as given to Parse.
func Client() string {
	return client
}

// Dial connects to addr over TCP, or over TLS when -tls-ca was given.
func Dial(addr string) net.Conn {
	Step("dial %s", addr)
	if tlsCA == "" {
		nc, err := net.Dial("tcp", addr)
		Check(err, "dial %s", addr)
		return nc
	}
	pem, err := os.ReadFile(tlsCA)
	Check(err, "read %s", tlsCA)
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		Failf("no certificate in %s", tlsCA)
	}
	config := &tls.Config{RootCAs: roots}
	if tlsCert != "" {
		pair, err := tls.LoadX509KeyPair(tlsCert, tlsKey)
		Check(err, "load %s and %s", tlsCert, tlsKey)
		config.Certificates = []tls.Certificate{pair}
	}
	Step("TLS handshake with %s", addr)
	nc, err := tls.Dial("tcp", addr, config)
	Check(err, "dial %s over TLS", addr)
	return nc
}

// Step names what the client is doing now; failures mention it.
func Step(format string, args ...any) {
	step = fmt.Sprintf(format, args...)
	if os.Getenv("INTEROP_VERBOSE") != "" {
		fmt.Fprintf(os.Stderr, "%s/%s: %s\n", client, scenario, step)
	}
}

// Failf reports a failure of the current step and exits 1.
func Failf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "FAIL %s/%s: step %q: %s\n", client, scenario, step, fmt.Sprintf(format, args...))
	os.Exit(1)
}

// Check fails if err is not nil.
func Check(err error, format string, args ...any) {
	if err != nil {
		Failf("%s: expected success, got error: %v", fmt.Sprintf(format, args...), err)
	}
}

// MustFail fails if err is nil: what should have failed succeeded.
func MustFail(err error, format string, args ...any) {
	if err == nil {
		Failf("%s: expected an error, got success", fmt.Sprintf(format, args...))
	}
}

// Equal fails if got != want.
func Equal[T comparable](what string, want, got T) {
	if want != got {
		Failf("%s: expected %v, got %v", what, want, got)
	}
}

// SameBytes fails if got differs from want, saying where.
func SameBytes(what string, want, got []byte) {
	if bytes.Equal(want, got) {
		return
	}
	n := min(len(want), len(got))
	at := n
	for i := 0; i < n; i++ {
		if want[i] != got[i] {
			at = i
			break
		}
	}
	Failf("%s: expected %d bytes, got %d bytes; first difference at offset %d (expected %s, got %s)",
		what, len(want), len(got), at, excerpt(want, at), excerpt(got, at))
}

func excerpt(b []byte, at int) string {
	if at >= len(b) {
		return "end of data"
	}
	end := min(len(b), at+16)
	return fmt.Sprintf("% x", b[at:end])
}

// Unique is a name no other run uses: prefix, pid and time.
func Unique(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), time.Now().UnixNano())
}

// Payload is n bytes of a pattern that repeats only every 251*256 bytes,
// so a misplaced chunk shows.
func Payload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i%251) ^ byte(i/251)
	}
	return b
}

// ManyNames is the names of the files of the big directory.
func ManyNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("f%05d", i)
	}
	return names
}

// Each runs fn on every name, a few at a time, and fails on the first error
// (in name order, so the report is stable).
func Each(names []string, fn func(string) error) {
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
			Failf("expected success, got error: %v", err)
		}
	}
}

// ReadAll reads a file from offset 0 to end of file through an open fid,
// bufSize bytes a call to r.ReadAt; r.ReadAt must say io.EOF at the end.
func ReadAll(r io.ReaderAt, bufSize int) []byte {
	var out []byte
	buf := make([]byte, bufSize)
	for off := int64(0); ; {
		n, err := r.ReadAt(buf, off)
		out = append(out, buf[:n]...)
		off += int64(n)
		if errors.Is(err, io.EOF) {
			return out
		}
		Check(err, "read at offset %d", off)
		if n == 0 {
			Failf("read at offset %d: expected data or end of file, got 0 bytes and no error", off)
		}
	}
}

// WriteAll writes data at offset off through an open fid and fails unless
// all of it was written; what names the data for messages.
func WriteAll(w io.WriterAt, data []byte, off int64, what string) {
	n, err := w.WriteAt(data, off)
	Check(err, "write %s (%d bytes at offset %d)", what, len(data), off)
	Equal("bytes written of "+what, len(data), n)
}

// ExactlyOnce fails unless got holds each of want exactly once and nothing else.
func ExactlyOnce(what string, want, got []string) {
	count := make(map[string]int, len(got))
	for _, g := range got {
		count[g]++
	}
	var missing, dup, extra []string
	for _, w := range want {
		switch c := count[w]; {
		case c == 0:
			missing = append(missing, w)
		case c > 1:
			dup = append(dup, fmt.Sprintf("%s(x%d)", w, c))
		}
		delete(count, w)
	}
	for g := range count {
		extra = append(extra, g)
	}
	if len(missing)+len(dup)+len(extra) == 0 && len(got) == len(want) {
		return
	}
	sort.Strings(extra)
	Failf("%s: expected %d distinct names each once, got %d entries: %d missing %s, %d duplicated %s, %d unexpected %s",
		what, len(want), len(got), len(missing), first(missing), len(dup), first(dup), len(extra), first(extra))
}

func first(s []string) string {
	if len(s) > 5 {
		return "[" + strings.Join(s[:5], " ") + " ...]"
	}
	return "[" + strings.Join(s, " ") + "]"
}

// Has reports whether names holds name.
func Has(names []string, name string) bool {
	for _, n := range names {
		if n == name {
			return true
		}
	}
	return false
}

// In fails unless name is in the listing of dir.
func In(dir string, names []string, name string) {
	if !Has(names, name) {
		Failf("listing of %s: expected it to hold %q, got %d entries %s", dir, name, len(names), first(names))
	}
}

// NotIn fails if name is in the listing of dir.
func NotIn(dir string, names []string, name string) {
	if Has(names, name) {
		Failf("listing of %s: expected %q to be absent, got it among %d entries %s", dir, name, len(names), first(names))
	}
}

// Pass reports success.
func Pass() {
	fmt.Printf("PASS %s/%s\n", client, scenario)
}
