// Package harness holds what the interop clients share: flags, failure
// reporting, unique names and payloads.
package harness

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"
)

// ExitTimeout is the exit status of a client that ran out of time; any
// other failure exits 1.
const ExitTimeout = 3

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
)

// Parse reads -addr, -scenario, -timeout and (for scenario export)
// -hostdir; name is the client's name for messages.
func Parse(name string) Config {
	client = name
	var c Config
	flag.StringVar(&c.Addr, "addr", "", "server address, host:port")
	flag.StringVar(&c.Scenario, "scenario", "", "ramfs, taskbag or export")
	flag.DurationVar(&c.Timeout, "timeout", 90*time.Second, "give up after this long")
	flag.StringVar(&c.HostDir, "hostdir", "", "for scenario export: the host directory the server exports")
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
