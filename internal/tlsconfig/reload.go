package tlsconfig

import (
	"errors"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// DefaultCheckInterval is how often, at most, a reloader looks at its
// files' modification times; it looks only when a handshake needs the
// material, so an idle process does no I/O.
const DefaultCheckInterval = time.Second

// watchConfig configures a watched value.
type watchConfig[T any] struct {
	// What names the files in log lines ("node TLS", "API TLS").
	What string
	// Paths are the files whose modification time and size tell a change.
	Paths []string
	// Load reads and checks the files.
	Load func() (T, error)
	// Accept, if set, may refuse a loaded value that replaces cur (a node
	// must not change identity while it runs).
	Accept func(cur, next T) error
	// Logger reports reloads and refused reloads; nil discards.
	Logger hclog.Logger
	// Interval defaults to DefaultCheckInterval; negative checks on every
	// call.
	Interval time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Loaded returns the attributes logged with a successful reload.
	Loaded func(T) []any
}

// watched is the one reloading mechanism of TLS files: the value loaded
// from Paths, loaded again when a file's stamp changed, looked at at most
// once per Interval. A reload that fails or is not accepted keeps the last
// good value and is logged once per distinct set of stamps: the files may
// be half written, and a rotation that never completes is an operator's
// error that must show without flooding the log.
type watched[T any] struct {
	cfg watchConfig[T]

	mu      sync.Mutex
	cur     T
	stamps  []stamp
	checked time.Time
	refused []stamp // the stamps of the last refused reload, logged once
}

type stamp struct {
	mod  time.Time
	size int64
}

// newWatched loads the files once; an error if they do not load.
func newWatched[T any](cfg watchConfig[T]) (*watched[T], error) {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Interval == 0 {
		cfg.Interval = DefaultCheckInterval
	}
	w := &watched[T]{cfg: cfg}
	stamps, err := w.stat()
	if err != nil {
		return nil, err
	}
	v, err := cfg.Load()
	if err != nil {
		return nil, err
	}
	w.cur, w.stamps, w.checked = v, stamps, cfg.Now()
	return w, nil
}

// Current returns the value to use now, reloading it first when a file
// changed since the last look (at most once per Interval).
func (w *watched[T]) Current() T {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.cfg.Now()
	if w.cfg.Interval > 0 && now.Sub(w.checked) < w.cfg.Interval {
		return w.cur
	}
	w.checked = now
	stamps, err := w.stat()
	if err == nil && sameStamps(stamps, w.stamps) {
		return w.cur
	}
	var next T
	if err == nil {
		next, err = w.cfg.Load()
	}
	if err == nil && w.cfg.Accept != nil {
		err = w.cfg.Accept(w.cur, next)
	}
	if err != nil {
		if !sameStamps(stamps, w.refused) {
			w.refused = stamps
			w.cfg.Logger.Error(w.cfg.What+" files changed but do not load; keeping the loaded ones", "error", err)
		}
		return w.cur
	}
	w.cur, w.stamps, w.refused = next, stamps, nil
	var attrs []any
	if w.cfg.Loaded != nil {
		attrs = w.cfg.Loaded(next)
	}
	w.cfg.Logger.Info("reloaded the "+w.cfg.What+" files", attrs...)
	return w.cur
}

// stat stamps every path; a missing file leaves a zero stamp and an error.
func (w *watched[T]) stat() ([]stamp, error) {
	out := make([]stamp, len(w.cfg.Paths))
	var errs []error
	for i, p := range w.cfg.Paths {
		fi, err := os.Stat(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out[i] = stamp{mod: fi.ModTime(), size: fi.Size()}
	}
	return out, errors.Join(errs...)
}

func sameStamps(a, b []stamp) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !a[i].mod.Equal(b[i].mod) || a[i].size != b[i].size {
			return false
		}
	}
	return true
}
