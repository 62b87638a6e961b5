// Package lifecycle is the one lifecycle every long-running part of a node
// shares (the loader, the preview runtime, heartbeats, the leader loop and
// the GitHub worker), after OPA's plugin manager: Start(ctx) starts the
// part's goroutines and returns, Stop(ctx) stops them and waits for them
// at most until ctx ends, and Status says what the part is doing, for
// GET /v1/status.
package lifecycle

import (
	"context"
	"sync"
)

// State is a part's condition, in OPA's vocabulary plus STOPPED.
type State string

// States of a part.
const (
	// NotReady: started, not doing its job yet (e.g. before a first load).
	NotReady State = "NOT_READY"
	// OK: doing its job.
	OK State = "OK"
	// Warn: doing its job, but something needs attention (retrying).
	Warn State = "WARN"
	// Error: cannot do its job; Message says why.
	Error State = "ERROR"
	// Stopped: not running (never started, stopped, or a leader-only part
	// on a follower).
	Stopped State = "STOPPED"
)

// Status is what a part reports.
type Status struct {
	State   State  `json:"state"`
	Message string `json:"message,omitempty"`
}

// Part is a long-running part of a node.
type Part interface {
	// Start starts the part's work in the background and returns; the
	// work ends when ctx ends or Stop is called.
	Start(ctx context.Context) error
	// Stop ends the work and waits for it, at most until ctx ends.
	Stop(ctx context.Context)
	// Status reports what the part is doing.
	Status() Status
}

// Runner runs one part's work function in a goroutine and keeps its
// status; parts embed it to get Start, Stop and Status with one meaning.
// The zero Runner is stopped.
type Runner struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
	status Status
}

// Go starts run(ctx) unless it is running already; the status becomes
// NotReady until the work sets it.
func (r *Runner) Go(ctx context.Context, run func(ctx context.Context)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done != nil {
		return
	}
	ctx, r.cancel = context.WithCancel(ctx)
	done := make(chan struct{})
	r.done = done
	r.status = Status{State: NotReady}
	go func() {
		defer close(done)
		run(ctx)
	}()
}

// Halt cancels the work and waits for it to return, at most until ctx
// ends; the status is Stopped once it returned.
func (r *Runner) Halt(ctx context.Context) {
	r.mu.Lock()
	cancel, done := r.cancel, r.done
	r.mu.Unlock()
	if done == nil {
		return
	}
	cancel()
	select {
	case <-done:
	case <-ctx.Done():
		return
	}
	r.mu.Lock()
	if r.done == done {
		r.done, r.cancel = nil, nil
		r.status = Status{State: Stopped}
	}
	r.mu.Unlock()
}

// Running reports whether the work was started and not halted.
func (r *Runner) Running() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.done != nil
}

// Set records the status the work reports; ignored while not running, so
// a part stopped stays Stopped.
func (r *Runner) Set(state State, msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done != nil {
		r.status = Status{State: state, Message: msg}
	}
}

// Status returns the last status (Stopped when not running).
func (r *Runner) Status() Status {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.done == nil {
		return Status{State: Stopped, Message: r.status.Message}
	}
	return r.status
}

// Named is a part with the name /v1/status shows it under.
type Named struct {
	Name string
	Part Part
}

// Reporter is anything with a Status: a part another part starts and
// stops (the GitHub worker runs for each leadership term of the loop).
type Reporter interface {
	Status() Status
}

// Manager starts parts in order, stops them in reverse order, and
// reports their statuses.
type Manager struct {
	parts   []Named
	watched []namedReporter
}

type namedReporter struct {
	name string
	r    Reporter
}

// Watch adds a part that another part starts and stops: the manager only
// reports its status.
func (m *Manager) Watch(name string, r Reporter) {
	m.watched = append(m.watched, namedReporter{name: name, r: r})
}

// Add appends a part; call before Start.
func (m *Manager) Add(name string, p Part) { m.parts = append(m.parts, Named{Name: name, Part: p}) }

// Start starts every part in the order added; on a failure it stops the
// ones started and returns the error.
func (m *Manager) Start(ctx context.Context) error {
	for i, n := range m.parts {
		if err := n.Part.Start(ctx); err != nil {
			for j := i - 1; j >= 0; j-- {
				m.parts[j].Part.Stop(ctx)
			}
			return err
		}
	}
	return nil
}

// Stop stops every part in reverse order, all within ctx.
func (m *Manager) Stop(ctx context.Context) {
	for i := len(m.parts) - 1; i >= 0; i-- {
		m.parts[i].Part.Stop(ctx)
	}
}

// Statuses returns each part's status by name.
func (m *Manager) Statuses() map[string]Status {
	out := make(map[string]Status, len(m.parts)+len(m.watched))
	for _, n := range m.parts {
		out[n.Name] = n.Part.Status()
	}
	for _, w := range m.watched {
		out[w.name] = w.r.Status()
	}
	return out
}
