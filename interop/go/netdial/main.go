// Command netdial fetches a web page through a Plan 9 /net served over
// 9P ('ninep serve net'), as Plan 9's dial(2) would, with
// 9fans.net/go/plan9/client (9P2000): cs translates the dial string, the
// clone file gives a conversation, connect makes the call, and the request
// and the page go through its data file. Dialling udp!, it sends one
// datagram to an echo server instead and reads the echo.
//
//	netdial -addr 127.0.0.1:5640 -dial tcp!localhost!8080 -want 'some text'
//	netdial -addr 127.0.0.1:5640 -dial udp!localhost!7000
//
// It exits 0 after printing PASS, or 1 saying what went wrong.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"9fans.net/go/plan9"
	"9fans.net/go/plan9/client"
)

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "FAIL netdial: "+format+"\n", args...)
	os.Exit(1)
}

func check(err error, what string) {
	if err != nil {
		fail("%s: %v", what, err)
	}
}

func main() {
	addr := flag.String("addr", "", "the /net server, host:port")
	dial := flag.String("dial", "", "what to dial, tcp!host!port")
	want := flag.String("want", "", "text the page must hold")
	flag.Parse()
	if *addr == "" || *dial == "" {
		fmt.Fprintln(os.Stderr, "usage: netdial -addr host:port -dial tcp!host!port -want TEXT")
		os.Exit(2)
	}
	conn, err := client.Dial("tcp", *addr)
	check(err, "connect")
	fs, err := conn.Attach(nil, "interop", "")
	check(err, "attach")

	cs, err := fs.Open("cs", plan9.ORDWR)
	check(err, "open cs")
	_, err = cs.Write([]byte(*dial))
	check(err, "write cs")
	buf := make([]byte, 1024)
	n, err := cs.Read(buf)
	check(err, "read cs")
	clone, target, ok := strings.Cut(string(buf[:n]), " ")
	if !ok || !strings.HasPrefix(clone, "/net/") {
		fail("cs answered %q", buf[:n])
	}

	ctl, err := fs.Open(strings.TrimPrefix(clone, "/net/"), plan9.ORDWR)
	check(err, "open "+clone)
	n, err = ctl.Read(buf)
	check(err, "read ctl")
	conv := strings.TrimSpace(string(buf[:n]))
	_, err = ctl.Write([]byte("connect " + target))
	check(err, "connect "+target)

	dir := strings.TrimSuffix(strings.TrimPrefix(clone, "/net/"), "clone") + conv
	data, err := fs.Open(dir+"/data", plan9.ORDWR)
	check(err, "open data")
	if strings.HasPrefix(*dial, "udp!") {
		echo(data, dir)
		return
	}
	_, err = data.Write([]byte("GET / HTTP/1.0\r\n\r\n"))
	check(err, "write request")
	page, err := io.ReadAll(data)
	check(err, "read page")
	if !strings.HasPrefix(string(page), "HTTP/1.") || !strings.Contains(string(page), *want) {
		fail("page %q lacks %q", page, *want)
	}
	data.Close()
	ctl.Close()
	fmt.Printf("PASS netdial: %d bytes through %s\n", len(page), dir)
}

// echo sends datagrams through data and checks each comes back whole.
func echo(data *client.Fid, dir string) {
	buf := make([]byte, 8192)
	for _, msg := range []string{"a datagram from Plan 9 dial", "and a second"} {
		_, err := data.Write([]byte(msg))
		check(err, "write datagram")
		n, err := data.Read(buf)
		check(err, "read datagram")
		if string(buf[:n]) != msg {
			fail("echo of %q came back as %q", msg, buf[:n])
		}
	}
	data.Close()
	fmt.Printf("PASS netdial: two datagrams echoed through %s\n", dir)
}
