package system

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// FloodSource is the address a Flood dials from: Linux routes all of
// 127.0.0.0/8 locally, so the attacker is a source of its own while the
// nodes use 127.0.0.1, as it would be on a network.
var FloodSource = net.IPv4(127, 0, 0, 2)

// Flood holds silent TCP connections open to node ports, as many as it
// has workers per target, and opens a new one as soon as the node drops
// one (issue 22, finding 4: no certificate is needed to take handshake
// slots). It stops with its context.
type Flood struct {
	dials, quick atomic.Int64 // connections opened; of them, dropped within flood's quick (refused at once)
	wg           sync.WaitGroup
}

// floodQuick: a connection dropped sooner than this was refused, not held
// until a deadline; its worker waits floodPause before the next one,
// since hammering a refusing port takes no more slots.
const (
	floodQuick = 500 * time.Millisecond
	floodPause = 250 * time.Millisecond
)

// StartFlood starts workers connections per address of addrs, until ctx
// ends; Wait waits for them to close.
func StartFlood(ctx context.Context, addrs []string, workers int) *Flood {
	f := &Flood{}
	for _, a := range addrs {
		for range workers {
			f.wg.Add(1)
			go f.work(ctx, a)
		}
	}
	return f
}

// work keeps one silent connection to addr open, reopening it once the
// node drops it: at once when it was held (the attacker wants the slot
// back), after floodPause when it was refused.
func (f *Flood) work(ctx context.Context, addr string) {
	defer f.wg.Done()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: FloodSource}, Timeout: time.Second}
	for ctx.Err() == nil {
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			sleep(ctx, floodPause)
			continue
		}
		f.dials.Add(1)
		opened := time.Now()
		stop := context.AfterFunc(ctx, func() { _ = c.Close() })
		_, _ = c.Read(make([]byte, 1)) // until the node drops it, or ctx ends
		stop()
		_ = c.Close()
		if time.Since(opened) < floodQuick {
			f.quick.Add(1)
			sleep(ctx, floodPause)
		}
	}
}

// Stats returns the connections opened so far and how many of them the
// node refused at once.
func (f *Flood) Stats() (dials, refused int64) { return f.dials.Load(), f.quick.Load() }

// Wait waits until every worker has stopped (after ctx ended).
func (f *Flood) Wait() { f.wg.Wait() }

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
