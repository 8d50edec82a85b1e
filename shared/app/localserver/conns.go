package localserver

import (
	"container/list"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/genway/genway/shared/metrics"
)

// Connection timing of genway serve (its bounds are app.Config's
// MaxConns, MaxConnsPerAddr and IdleTimeout).
const (
	// connGrace is how long an accepted connection may stay silent
	// (no byte of a request yet) before it counts as idle: a client
	// sends its request at once.
	connGrace = time.Second
	// fdReserve is the share of the process's file descriptors kept
	// for everything but client connections (upstream calls, the store,
	// media files): GENWAY_MAX_CONNS is lowered to leave it.
	fdReserve = 4
)

// connGate is the listener of genway serve. It bounds the connections
// open at once, in all (max) and per client address (perAddr: an IPv4
// address, or an IPv6 /64), and closes idle connections first (kept
// alive between requests, or accepted and silent for longer than
// connGrace) when a bound is near, so that connections that sit idle
// cannot keep a client that has a request to make from being served:
//
//   - A new connection from an address at perAddr closes that address's
//     longest-idle connection; if it has none (every one has a request
//     in progress), the new connection is answered 503
//     too_many_connections and closed.
//   - Under pressure (at least 7/8 of max open), each new connection
//     closes the longest-idle connection of any address, and a
//     connection that goes idle after its answer is closed at once.
//   - At max, a new connection first closes the longest-idle one; if
//     none is idle, Accept waits until one closes (the kernel's listen
//     backlog holds the rest).
//
// It learns which connections are idle from the server's ConnState hook
// (state). Safe for concurrent use.
type connGate struct {
	net.Listener
	max, perAddr int
	high         int // pressure from this many open connections
	now          func() time.Time
	slots        chan struct{} // one token per open connection
	done         chan struct{} // closed by Close: a waiting Accept returns
	closeOnce    sync.Once

	mu    sync.Mutex
	open  int                               // connections let through and not yet closed
	addrs map[string]map[*gateConn]struct{} // open connections by client address
	idle  list.List                         // *gateConn not serving a request, longest idle first
}

// newConnGate returns ln behind a gate of max connections, perAddr from
// one client address (both at least 1; perAddr is at most max).
func newConnGate(ln net.Listener, max, perAddr int) *connGate {
	return &connGate{Listener: ln, max: max, perAddr: min(perAddr, max), high: max - max/8, now: time.Now,
		slots: make(chan struct{}, max), done: make(chan struct{}), addrs: map[string]map[*gateConn]struct{}{}}
}

// gateConn is a connection the gate let through.
type gateConn struct {
	net.Conn
	g     *connGate
	addr  string
	state http.ConnState // the server's view, under g.mu
	since time.Time      // when it became idle (or was accepted)
	elem  *list.Element  // in g.idle while not serving a request; nil else
	gone  bool           // closed: no longer counted
	once  sync.Once
}

// Close closes the connection and frees its place.
func (c *gateConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.g.release(c) })
	return err
}

// Close stops Accept, including one waiting for room.
func (g *connGate) Close() error {
	g.closeOnce.Do(func() { close(g.done) })
	return g.Listener.Close()
}

// Accept returns the next connection, as connGate describes.
func (g *connGate) Accept() (net.Conn, error) {
	for {
		if err := g.room(); err != nil {
			return nil, err
		}
		c, err := g.Listener.Accept()
		if err != nil {
			<-g.slots
			return nil, err
		}
		gc, victims := g.admit(c)
		for _, v := range victims {
			closeIdle(v)
		}
		if gc == nil {
			<-g.slots
			refuseConn(c, g.perAddr)
			continue
		}
		return gc, nil
	}
}

// room takes a slot for the next connection. At max, an idle connection
// makes room (its Close frees a slot); with none, it waits for one to
// close, looking again every connGrace for a silent one to close.
func (g *connGate) room() error {
	select {
	case g.slots <- struct{}{}:
		return nil
	default:
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case g.slots <- struct{}{}:
			return nil
		case <-g.done:
			return net.ErrClosed
		case <-t.C:
			if v := g.victim(""); v != nil {
				closeIdle(v)
			}
			t.Reset(connGrace)
		}
	}
}

// admit counts c, the connection just accepted, under its address: nil if
// its address is at perAddr with no idle connection to close. victims are
// the idle connections to close to make room for it (its address's, and
// under pressure one more of any address).
func (g *connGate) admit(c net.Conn) (gc *gateConn, victims []*gateConn) {
	addr := addrKey(c.RemoteAddr())
	g.mu.Lock()
	defer g.mu.Unlock()
	conns := g.addrs[addr]
	if len(conns) >= g.perAddr {
		v := g.victimLocked(addr)
		if v == nil {
			return nil, nil
		}
		g.forgetLocked(v)
		victims = append(victims, v)
	}
	if conns == nil {
		conns = map[*gateConn]struct{}{}
		g.addrs[addr] = conns
	}
	gc = &gateConn{Conn: c, g: g, addr: addr, state: http.StateNew, since: g.now()}
	gc.elem = g.idle.PushBack(gc)
	conns[gc] = struct{}{}
	g.open++
	if g.open >= g.high {
		if v := g.victimLocked(""); v != nil {
			g.forgetLocked(v)
			victims = append(victims, v)
		}
	}
	return gc, victims
}

// victim takes the longest-idle connection of addr ("": of any address)
// out of the count, for its caller to close; nil if none is idle.
func (g *connGate) victim(addr string) *gateConn {
	g.mu.Lock()
	defer g.mu.Unlock()
	v := g.victimLocked(addr)
	if v != nil {
		g.forgetLocked(v)
	}
	return v
}

// victimLocked returns the longest-idle connection of addr ("": of any
// address): idle after an answer, or accepted and silent past connGrace.
func (g *connGate) victimLocked(addr string) *gateConn {
	now := g.now()
	for e := g.idle.Front(); e != nil; e = e.Next() {
		c := e.Value.(*gateConn)
		if addr != "" && c.addr != addr {
			continue
		}
		if c.state == http.StateIdle || now.Sub(c.since) >= connGrace {
			return c
		}
	}
	return nil
}

// forgetLocked takes c out of the gate's books (its slot is freed by its
// Close).
func (g *connGate) forgetLocked(c *gateConn) {
	if c.gone {
		return
	}
	c.gone = true
	g.open--
	if c.elem != nil {
		g.idle.Remove(c.elem)
		c.elem = nil
	}
	conns := g.addrs[c.addr]
	delete(conns, c)
	if len(conns) == 0 {
		delete(g.addrs, c.addr)
	}
}

// release frees the place of c, which has closed.
func (g *connGate) release(c *gateConn) {
	g.mu.Lock()
	g.forgetLocked(c)
	g.mu.Unlock()
	<-g.slots
}

// state is the server's ConnState hook: it keeps the list of idle
// connections, and under pressure closes a connection that goes idle.
func (g *connGate) state(nc net.Conn, s http.ConnState) {
	c, ok := nc.(*gateConn)
	if !ok {
		return
	}
	g.mu.Lock()
	if c.gone {
		g.mu.Unlock()
		return
	}
	c.state = s
	if c.elem != nil {
		g.idle.Remove(c.elem)
		c.elem = nil
	}
	closeNow := false
	switch s {
	case http.StateNew, http.StateIdle:
		if s == http.StateIdle && g.open >= g.high {
			g.forgetLocked(c)
			closeNow = true
			break
		}
		c.since = g.now()
		c.elem = g.idle.PushBack(c)
	}
	g.mu.Unlock()
	if closeNow {
		closeIdle(c)
	}
}

// addrKey is the client address a connection counts under: its IPv4
// address, or the /64 of its IPv6 address (one host may hold a whole
// /64); "" if it has none.
func addrKey(a net.Addr) string {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return ""
	}
	ip := ta.AddrPort().Addr().Unmap()
	if ip.Is6() {
		return netip.PrefixFrom(ip, 64).Masked().String()
	}
	return ip.String()
}

// closeIdle closes an idle connection to make room, and counts it.
func closeIdle(c *gateConn) {
	c.Close()
	metrics.Default.Add("genway_connections_closed_total", "Connections genway serve closed to bound them: idle ones closed for room, new ones refused.",
		[]string{"reason"}, []string{"idle"}, 1)
}

// openConns returns the connections open now.
func (g *connGate) openConns() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.open
}

// refuseConn answers a connection the gate refused with a 503 in the
// OpenAI error envelope and closes it. The write is one small packet on a
// fresh connection; its deadline keeps a client that reads nothing from
// holding Accept.
func refuseConn(c net.Conn, perAddr int) {
	body := fmt.Sprintf(`{"error":{"message":"Too many connections from your address (%d open, each with a request in progress); retry when one ends.","type":"api_error","param":null,"code":"too_many_connections"}}`+"\n", perAddr)
	c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	fmt.Fprintf(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	c.Close()
	metrics.Default.Add("genway_connections_closed_total", "Connections genway serve closed to bound them: idle ones closed for room, new ones refused.",
		[]string{"reason"}, []string{"refused"}, 1)
}

// fitConns returns n, lowered if need be so that client connections
// leave a 1/fdReserve share of the process's nofile file descriptors
// (ulimit -n; 0 if unknown) to the rest: upstream calls, the store,
// media files. A lowered value is logged.
func fitConns(n int, nofile uint64, log *slog.Logger) int {
	if nofile == 0 {
		return n
	}
	fit := max(int(min(nofile-nofile/fdReserve, 1<<30)), 1)
	if n <= fit {
		return n
	}
	log.Warn("GENWAY_MAX_CONNS lowered to fit the open-file limit (ulimit -n)", "asked", n, "used", fit, "nofile", nofile)
	return fit
}
