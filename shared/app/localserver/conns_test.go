package localserver

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// guardWait bounds the waits of these tests; reaching it is a failure.
const guardWait = 30 * time.Second

// gateHarness is a connGate on a loopback listener, its Accept run by a
// goroutine that hands each connection to the test, and a clock the test
// moves.
type gateHarness struct {
	g        *connGate
	accepted chan net.Conn
	now      atomic.Int64 // the gate's clock, Unix nanoseconds: the test moves it while the gate accepts
}

// advance moves the gate's clock by d.
func (h *gateHarness) advance(d time.Duration) { h.now.Add(int64(d)) }

func newGateHarness(t *testing.T, max, perAddr int) *gateHarness {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &gateHarness{g: newConnGate(ln, max, perAddr), accepted: make(chan net.Conn, 64)}
	h.now.Store(time.Unix(1_700_000_000, 0).UnixNano())
	h.g.now = func() time.Time { return time.Unix(0, h.now.Load()) }
	go func() {
		for {
			c, err := h.g.Accept()
			if err != nil {
				close(h.accepted)
				return
			}
			h.accepted <- c
		}
	}()
	t.Cleanup(func() {
		h.g.Close()
		for c := range h.accepted {
			c.Close()
		}
	})
	return h
}

// dialFrom connects to the gate from the loopback address from
// (127.0.0.x: all of 127/8 is loopback on Linux); the test is skipped
// where the system cannot bind it.
func dialFrom(t *testing.T, addr net.Addr, from string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr.String())
	if err != nil {
		t.Skipf("cannot connect from %s (binding 127.0.0.x needs Linux): %v", from, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// accept returns the next connection the gate let through; nil if none
// comes within wait.
func (h *gateHarness) accept(t *testing.T, wait time.Duration) net.Conn {
	t.Helper()
	select {
	case c := <-h.accepted:
		t.Cleanup(func() { c.Close() })
		return c
	case <-time.After(wait):
		return nil
	}
}

// open dials from and returns the server's side of the connection.
func (h *gateHarness) open(t *testing.T, from string) (client, server net.Conn) {
	t.Helper()
	client = dialFrom(t, h.g.Addr(), from)
	server = h.accept(t, guardWait)
	if server == nil {
		t.Fatalf("a connection from %s was not accepted", from)
	}
	return client, server
}

// closedByServer reports whether the server closed c: a read gets EOF
// (or a reset) within guardWait. Anything the server wrote first is
// returned.
func closedByServer(c net.Conn) (bool, string) {
	c.SetReadDeadline(time.Now().Add(guardWait))
	b, err := io.ReadAll(c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return false, string(b)
	}
	return true, string(b)
}

// stillOpen reports whether c is open: a short read times out.
func stillOpen(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	_, err := c.Read(make([]byte, 1))
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

func TestConnGatePerAddress(t *testing.T) {
	tests := []struct {
		name string
		// the states of the address's two open connections, and how long
		// ago they entered them
		states  [2]http.ConnState
		ago     time.Duration
		evicted int // which one the third connection closes; -1: it is refused
	}{
		{"an idle one makes room", [2]http.ConnState{http.StateActive, http.StateIdle}, 0, 1},
		{"the longest idle makes room", [2]http.ConnState{http.StateIdle, http.StateIdle}, 0, 0},
		{"a silent new one past the grace makes room", [2]http.ConnState{http.StateActive, http.StateNew}, 2 * connGrace, 1},
		{"a new one within the grace does not", [2]http.ConnState{http.StateActive, http.StateNew}, connGrace / 2, -1},
		{"none idle: refused", [2]http.ConnState{http.StateActive, http.StateActive}, 0, -1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newGateHarness(t, 100, 2)
			var clients [2]net.Conn
			for i := range clients {
				var srv net.Conn
				clients[i], srv = h.open(t, "127.0.0.2")
				h.g.state(srv, tt.states[i])
				h.advance(time.Millisecond)
			}
			h.advance(tt.ago)
			third := dialFrom(t, h.g.Addr(), "127.0.0.2")
			if tt.evicted < 0 {
				closed, got := closedByServer(third)
				if !closed || !strings.HasPrefix(got, "HTTP/1.1 503") || !strings.Contains(got, `"code":"too_many_connections"`) {
					t.Fatalf("third connection: closed %v after %q; want a 503 too_many_connections", closed, got)
				}
				for i, c := range clients {
					if !stillOpen(c) {
						t.Errorf("connection %d was closed; want both kept", i)
					}
				}
				// Another address is not concerned.
				if _, srv := h.open(t, "127.0.0.3"); srv == nil {
					t.Error("a connection from another address was refused")
				}
				return
			}
			if h.accept(t, guardWait) == nil {
				t.Fatal("the third connection was not accepted")
			}
			for i, c := range clients {
				if open := stillOpen(c); open == (i == tt.evicted) {
					t.Errorf("connection %d open = %v; want %v", i, open, i != tt.evicted)
				}
			}
		})
	}
}

// TestConnGatePressure: with at least 7/8 of the connections open, a new
// one closes the longest-idle one of any address, and one that goes idle
// is closed at once; below that mark, idle connections stay.
func TestConnGatePressure(t *testing.T) {
	t.Run("a new connection closes the longest idle", func(t *testing.T) {
		h := newGateHarness(t, 8, 8) // pressure from 7 open
		var clients []net.Conn
		for i := range 6 {
			c, s := h.open(t, fmt.Sprintf("127.0.0.%d", 2+i))
			h.g.state(s, http.StateIdle)
			h.advance(time.Millisecond)
			clients = append(clients, c)
		}
		if !stillOpen(clients[0]) {
			t.Fatal("below the mark, an idle connection was closed")
		}
		h.open(t, "127.0.0.20") // the 7th
		if closed, _ := closedByServer(clients[0]); !closed {
			t.Error("the 7th connection did not close the longest-idle one")
		}
		for i := 1; i < len(clients); i++ {
			if !stillOpen(clients[i]) {
				t.Errorf("connection %d closed; want only the longest idle", i)
			}
		}
	})
	t.Run("a connection that goes idle is closed", func(t *testing.T) {
		h := newGateHarness(t, 8, 8)
		var clients, servers []net.Conn
		for i := range 7 {
			c, s := h.open(t, fmt.Sprintf("127.0.0.%d", 2+i))
			h.g.state(s, http.StateActive)
			clients, servers = append(clients, c), append(servers, s)
		}
		h.g.state(servers[0], http.StateIdle) // 7 open: its answer done, closed
		if closed, _ := closedByServer(clients[0]); !closed {
			t.Fatal("at the mark, a connection that went idle was kept")
		}
		h.g.state(servers[1], http.StateIdle) // 6 open: kept alive
		if !stillOpen(clients[1]) {
			t.Error("below the mark, a connection that went idle was closed")
		}
	})
}

// TestConnGateFull: at max, a new connection closes an idle one; with
// none idle, it waits until one closes.
func TestConnGateFull(t *testing.T) {
	h := newGateHarness(t, 2, 2)
	c1, s1 := h.open(t, "127.0.0.2")
	_, s2 := h.open(t, "127.0.0.3")
	h.g.state(s1, http.StateActive)
	h.g.state(s2, http.StateActive)
	dialFrom(t, h.g.Addr(), "127.0.0.4")
	if c := h.accept(t, 200*time.Millisecond); c != nil {
		t.Fatal("a third connection was let through while two were open and active")
	}
	h.g.state(s1, http.StateIdle) // 2 of 2: pressure, so it is closed at once
	if closed, _ := closedByServer(c1); !closed {
		t.Fatal("an idle connection at the bound was kept")
	}
	if h.accept(t, guardWait) == nil {
		t.Fatal("the waiting connection was not accepted once one closed")
	}
}

func TestAddrKey(t *testing.T) {
	tests := []struct {
		addr net.Addr
		want string
	}{
		{&net.TCPAddr{IP: net.ParseIP("203.0.113.7"), Port: 1}, "203.0.113.7"},
		{&net.TCPAddr{IP: net.ParseIP("::ffff:203.0.113.7"), Port: 1}, "203.0.113.7"},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:aaaa::1"), Port: 1}, "2001:db8:1:2::/64"},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8:1:2:ffff::9"), Port: 2}, "2001:db8:1:2::/64"},
		{&net.TCPAddr{IP: net.ParseIP("2001:db8:1:3::1"), Port: 1}, "2001:db8:1:3::/64"},
		{&net.UnixAddr{Name: "/tmp/x", Net: "unix"}, ""},
	}
	for _, tt := range tests {
		if got := addrKey(tt.addr); got != tt.want {
			t.Errorf("addrKey(%v) = %q; want %q", tt.addr, got, tt.want)
		}
	}
}

func TestFitConns(t *testing.T) {
	tests := []struct {
		n      int
		nofile uint64
		want   int
	}{
		{4096, 0, 4096},         // unknown: as asked
		{4096, 1 << 20, 4096},   // plenty
		{4096, 4096, 3072},      // a quarter kept for the rest
		{4096, 1024, 768},       //
		{100, 1024, 100},        //
		{4096, 1<<64 - 1, 4096}, // RLIM_INFINITY
	}
	log := slog.New(slog.DiscardHandler)
	for _, tt := range tests {
		if got := fitConns(tt.n, tt.nofile, log); got != tt.want {
			t.Errorf("fitConns(%d, %d) = %d; want %d", tt.n, tt.nofile, got, tt.want)
		}
	}
}

// readResponse reads one response from c within guardWait.
func readResponse(c net.Conn, br *bufio.Reader) (*http.Response, error) {
	c.SetReadDeadline(time.Now().Add(guardWait))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return nil, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, err
}
