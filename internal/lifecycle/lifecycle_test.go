package lifecycle

import (
	"context"
	"errors"
	"testing"
)

// part records its calls; run blocks until its context ends.
type part struct {
	Runner
	name  string
	log   *[]string
	fail  error
	state State
}

func (p *part) Start(ctx context.Context) error {
	*p.log = append(*p.log, "start "+p.name)
	if p.fail != nil {
		return p.fail
	}
	p.Go(ctx, func(ctx context.Context) {
		p.Set(p.state, p.name+" runs")
		<-ctx.Done()
	})
	return nil
}

func (p *part) Stop(ctx context.Context) {
	*p.log = append(*p.log, "stop "+p.name)
	p.Halt(ctx)
}

type reporter Status

func (r reporter) Status() Status { return Status(r) }

func TestManagerOrderAndStatus(t *testing.T) {
	var log []string
	a, b := &part{name: "a", log: &log, state: OK}, &part{name: "b", log: &log, state: Warn}
	var m Manager
	m.Add("a", a)
	m.Add("b", b)
	m.Watch("w", reporter{State: Stopped, Message: "not the leader"})
	if s := m.Statuses(); s["a"].State != Stopped || s["b"].State != Stopped || s["w"].Message != "not the leader" {
		t.Fatalf("before Start: %+v", s)
	}
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !a.Running() || !b.Running() {
		t.Fatal("parts not running after Start")
	}
	m.Stop(context.Background())
	if got := []string{"start a", "start b", "stop b", "stop a"}; len(log) != 4 || log[2] != got[2] || log[3] != got[3] {
		t.Fatalf("calls %q, want %q", log, got)
	}
	if s := m.Statuses(); s["a"].State != Stopped || s["b"].State != Stopped || a.Running() {
		t.Fatalf("after Stop: %+v", s)
	}
}

// A part that fails to start stops the ones already started.
func TestManagerStartFailure(t *testing.T) {
	var log []string
	a := &part{name: "a", log: &log, state: OK}
	b := &part{name: "b", log: &log, fail: errors.New("no")}
	var m Manager
	m.Add("a", a)
	m.Add("b", b)
	if err := m.Start(context.Background()); err == nil || a.Running() {
		t.Fatalf("Start = %v, a running %v", err, a.Running())
	}
	if len(log) != 3 || log[2] != "stop a" {
		t.Fatalf("calls %q", log)
	}
}

// Halt waits for the work at most until its context ends; a second Go
// while running does nothing.
func TestRunnerHaltDeadline(t *testing.T) {
	var r Runner
	release := make(chan struct{})
	r.Go(context.Background(), func(context.Context) { <-release })
	r.Go(context.Background(), func(context.Context) { t.Error("second run started") })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r.Halt(ctx) // the work ignores its context: Halt gives up at once
	if !r.Running() {
		t.Fatal("a part whose work has not returned reads as stopped")
	}
	close(release)
	r.Halt(context.Background())
	if r.Running() || r.Status().State != Stopped {
		t.Fatalf("after the work returned: %+v", r.Status())
	}
}
