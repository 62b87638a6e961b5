package node

import (
	"context"
	"fmt"

	"github.com/policyrollout/reconciler/internal/lifecycle"
)

// The names under which /v1/status reports this node's parts.
const (
	partLoader     = "loader"
	partPreview    = "preview"
	partHeartbeats = "heartbeats"
	partLeader     = "leader"
	partGitHub     = "github"
)

// runPart makes a part's run(ctx) function a lifecycle.Part: Start runs
// it in the background, Stop cancels it and waits. While it runs, status
// (when set) says what the part is doing; else it is OK.
type runPart struct {
	lifecycle.Runner
	run    func(ctx context.Context)
	status func() lifecycle.Status
}

var _ lifecycle.Part = (*runPart)(nil)

// Start implements lifecycle.Part.
func (p *runPart) Start(ctx context.Context) error {
	p.Go(ctx, func(ctx context.Context) {
		p.Set(lifecycle.OK, "")
		p.run(ctx)
	})
	return nil
}

// Stop implements lifecycle.Part.
func (p *runPart) Stop(ctx context.Context) { p.Halt(ctx) }

// Status implements lifecycle.Part.
func (p *runPart) Status() lifecycle.Status {
	s := p.Runner.Status()
	if s.State == lifecycle.Stopped || p.status == nil {
		return s
	}
	return p.status()
}

// addParts registers the node's long-running parts in start order: the
// loader first (it serves what raft restored), then preview, heartbeats,
// and the leadership watch that runs the leader loop (and, with it, the
// GitHub worker) while this node leads.
func (m *Main) addParts() {
	m.parts.Add(partLoader, &runPart{run: m.loader.run, status: m.loaderStatus})
	m.parts.Add(partPreview, &runPart{run: m.preview.run})
	m.parts.Add(partHeartbeats, &runPart{run: func(ctx context.Context) { m.cluster.RunHeartbeats(ctx, m.gens.served) }})
	m.parts.Add(partLeader, &runPart{run: func(ctx context.Context) {
		m.cluster.RunLeadership(ctx, m.store.LeaderCh(), m.lead)
	}, status: m.loop.Status})
	if m.github != nil {
		m.parts.Watch(partGitHub, m.github)
	}
}

// loaderStatus is NOT_READY until a generation is served.
func (m *Main) loaderStatus() lifecycle.Status {
	if n := m.gens.served(); n != 0 {
		return lifecycle.Status{State: lifecycle.OK, Message: fmt.Sprintf("serving generation %d", n)}
	}
	return lifecycle.Status{State: lifecycle.NotReady, Message: "no generation loaded yet"}
}
