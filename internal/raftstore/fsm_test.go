package raftstore

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

func TestFSMGenerationLifecycle(t *testing.T) {
	h := newHarness(t, false)
	h.mustApply(stage(1, 1))
	h.mustApply(&ReportReady{Generation: 1, NodeID: "a", Time: at(2)})
	h.mustApply(&ReportReady{Generation: 1, NodeID: "b", Time: at(3)})
	h.mustApply(&ActivateGeneration{Generation: 1, Time: at(4)})

	s := h.fsm.State()
	g1, _ := s.ActiveGeneration()
	if s.Active != 1 || s.Staged != 0 || g1.State != GenerationActive || !g1.ActivateTime.Equal(at(4)) {
		t.Fatalf("after activate 1: active=%d staged=%d g1=%+v", s.Active, s.Staged, g1)
	}
	if len(g1.ReadyNodes) != 2 || !g1.ReadyNodes["b"].Equal(at(3)) {
		t.Fatalf("ready nodes = %v", g1.ReadyNodes)
	}

	h.mustApply(stage(2, 5))
	h.mustApply(stage(3, 6)) // supersedes 2
	s = h.fsm.State()
	if g2, _ := s.Generation(2); g2.State != GenerationSuperseded || g2.Files != nil || !g2.StateTime.Equal(at(6)) {
		t.Fatalf("generation 2 = %+v, want SUPERSEDED without files", g2)
	}
	if s.Staged != 3 || s.Highest != 3 {
		t.Fatalf("staged=%d highest=%d", s.Staged, s.Highest)
	}

	h.mustApply(&ActivateGeneration{Generation: 3, Time: at(7)})
	s = h.fsm.State()
	prev, _ := s.PreviousGeneration()
	if s.Active != 3 || s.Previous != 1 || prev.State != GenerationRetired || prev.Files == nil {
		t.Fatalf("active=%d previous=%d prev=%+v: previous must keep its files", s.Active, s.Previous, prev)
	}

	h.mustApply(stage(4, 8))
	h.mustApply(&ActivateGeneration{Generation: 4, Time: at(9)})
	s = h.fsm.State()
	if g1, _ := s.Generation(1); s.Previous != 3 || g1.Files != nil || g1.State != GenerationRetired {
		t.Fatalf("previous=%d g1=%+v: two generations back must lose its files", s.Previous, g1)
	}
	if s.LastIndex != h.index {
		t.Fatalf("LastIndex = %d, want %d", s.LastIndex, h.index)
	}
}

// TestFSMFailureInvalidatesStaged: a version 1 ReportFailed (an old
// build's log entry) makes the staged generation INVALID.
func TestFSMFailureInvalidatesStaged(t *testing.T) {
	h := newHarness(t, false)
	h.mustApply(stage(1, 1))
	h.mustApply(&ReportReady{Generation: 1, NodeID: "a", Time: at(2)})
	if err := h.applyCmd(rawCmd(t, TypeReportFailed, 1, ReportFailed{Generation: 1, NodeID: "a",
		Errors: []string{"web.yaml:3: no such field"}, Time: at(3)})); err != nil {
		t.Fatal(err)
	}
	s := h.fsm.State()
	g, _ := s.Generation(1)
	if g.State != GenerationInvalid || g.Files != nil || s.Staged != 0 || len(g.ReadyNodes) != 0 {
		t.Fatalf("generation 1 = %+v staged=%d", g, s.Staged)
	}
	if got := g.NodeErrors["a"]; len(got) != 1 {
		t.Fatalf("node errors = %v", g.NodeErrors)
	}
	err := h.apply(&ActivateGeneration{Generation: 1, Time: at(4)})
	if !errors.Is(err, ErrGenerationState) {
		t.Fatalf("activate invalid: %v", err)
	}
}

func TestFSMMarkInvalid(t *testing.T) {
	h := newHarness(t, false)
	h.mustApply(&MarkInvalid{Generation: 1, Commit: "bad1", Errors: []string{"git: fetch failed"}, Time: at(1)})
	s := h.fsm.State()
	g, _ := s.Generation(1)
	if g.State != GenerationInvalid || g.Commit != "bad1" || s.Highest != 1 || s.Staged != 0 {
		t.Fatalf("recorded failure = %+v highest=%d", g, s.Highest)
	}
	h.mustApply(stage(2, 2))
	h.mustApply(&MarkInvalid{Generation: 2, Errors: []string{"late validation"}, Time: at(3)})
	if g, _ := h.fsm.State().Generation(2); g.State != GenerationInvalid || len(g.LeaderErrors) != 1 {
		t.Fatalf("staged then marked invalid = %+v", g)
	}
}

func TestFSMNodes(t *testing.T) {
	h := newHarness(t, false)
	h.mustApply(&UpsertNode{ID: "a", RaftAddr: "10.0.0.1:7000", HTTPAddr: "10.0.0.1:8080", Group: "edge", Voter: true, Time: at(1)})
	n := h.fsm.State().Nodes["a"]
	if n.State != NodeActive || !n.JoinTime.Equal(at(1)) || n.HTTPAddr != "10.0.0.1:8080" {
		t.Fatalf("node = %+v", n)
	}
	// Group changes only while PASSIVE.
	err := h.apply(&UpsertNode{ID: "a", Group: "core", Time: at(3)})
	if !errors.Is(err, ErrNodeState) {
		t.Fatalf("group change while ACTIVE: %v", err)
	}
	h.mustApply(&SetNodeState{ID: "a", State: NodePassive})
	h.mustApply(&UpsertNode{ID: "a", RaftAddr: "10.0.0.1:7000", Group: "core", Subgroup: "x", Time: at(4)})
	n = h.fsm.State().Nodes["a"]
	if n.Group != "core" || n.State != NodePassive || !n.JoinTime.Equal(at(1)) {
		t.Fatalf("node after move = %+v", n)
	}
	h.mustApply(&SetNodeState{ID: "a", State: NodeTerminated})
	if err := h.apply(&SetNodeState{ID: "a", State: NodeActive}); !errors.Is(err, ErrNodeState) {
		t.Fatalf("leaving TERMINATED: %v", err)
	}
	h.mustApply(&UpsertNode{ID: "a", Group: "edge", Time: at(5)}) // registers anew
	if n := h.fsm.State().Nodes["a"]; n.State != NodeActive || !n.JoinTime.Equal(at(5)) {
		t.Fatalf("re-registered node = %+v", n)
	}
	h.mustApply(&RemoveNode{ID: "a"})
	h.mustApply(&RemoveNode{ID: "a"}) // idempotent
	if len(h.fsm.State().Nodes) != 0 {
		t.Fatal("node not removed")
	}
}

func TestFSMExperimentsAndOperations(t *testing.T) {
	h := newHarness(t, false)
	h.mustApply(&PutExperiment{Name: "policies/x/experiments/pr-1", Data: json.RawMessage(`{"state":"ACTIVE"}`)})
	h.mustApply(&PutOperation{ID: "op-1", Data: json.RawMessage(`{"done":false}`)})
	s := h.fsm.State()
	if string(s.Experiments["policies/x/experiments/pr-1"].Data) != `{"state":"ACTIVE"}` || len(s.Operations) != 1 {
		t.Fatalf("experiments=%v operations=%v", s.Experiments, s.Operations)
	}
	h.mustApply(&DeleteExperiment{Name: "policies/x/experiments/pr-1"})
	h.mustApply(&DeleteOperation{ID: "op-1"})
	h.mustApply(&DeleteOperation{ID: "never-existed"})
	if s := h.fsm.State(); len(s.Experiments) != 0 || len(s.Operations) != 0 {
		t.Fatal("not deleted")
	}
}

// rawCmd builds an envelope by hand, bypassing NewCommand's checks, as an
// older or buggy proposer could.
func rawCmd(t *testing.T, typ CommandType, version uint8, payload any) Command {
	raw, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	return Command{Type: typ, Version: version, Payload: raw}
}

func TestFSMRejections(t *testing.T) {
	big := stage(9, 9)
	big.Files["huge.bin"] = make([]byte, MaxInlineBundleBytes)
	cases := []struct {
		name string
		cmd  func(t *testing.T) Command
		want error
	}{
		{"stage same number", func(t *testing.T) Command { return mustCmd(t, stage(4, 9)) }, ErrGenerationNotNewer},
		{"stage lower number", func(t *testing.T) Command { return mustCmd(t, stage(1, 9)) }, ErrGenerationNotNewer},
		{"mark invalid old number", func(t *testing.T) Command {
			return mustCmd(t, &MarkInvalid{Generation: 3, Commit: "x", Errors: []string{"e"}, Time: at(9)})
		}, ErrGenerationNotNewer},
		{"mark superseded invalid", func(t *testing.T) Command {
			return mustCmd(t, &MarkInvalid{Generation: 2, Errors: []string{"e"}, Time: at(9)})
		}, ErrGenerationState},
		{"activate unknown", func(t *testing.T) Command {
			return mustCmd(t, &ActivateGeneration{Generation: 42, Time: at(9)})
		}, ErrUnknownGeneration},
		{"activate active", func(t *testing.T) Command {
			return mustCmd(t, &ActivateGeneration{Generation: 1, Time: at(9)})
		}, ErrGenerationState},
		{"activate superseded", func(t *testing.T) Command {
			return mustCmd(t, &ActivateGeneration{Generation: 2, Time: at(9)})
		}, ErrGenerationState},
		{"ready unknown generation", func(t *testing.T) Command {
			return mustCmd(t, &ReportReady{Generation: 42, NodeID: "a", Time: at(9)})
		}, ErrUnknownGeneration},
		{"failed unknown generation", func(t *testing.T) Command {
			return mustCmd(t, &ReportFailed{Generation: 42, NodeID: "a", Errors: []string{"e"}, Time: at(9)})
		}, ErrUnknownGeneration},
		{"mark active invalid", func(t *testing.T) Command {
			return mustCmd(t, &MarkInvalid{Generation: 1, Errors: []string{"e"}, Time: at(9)})
		}, ErrGenerationState},
		{"mark invalid wrong commit", func(t *testing.T) Command {
			return mustCmd(t, &MarkInvalid{Generation: 4, Commit: "other", Errors: []string{"e"}, Time: at(9)})
		}, ErrInvalidCommand},
		{"state of unknown node", func(t *testing.T) Command {
			return mustCmd(t, &SetNodeState{ID: "zz", State: NodeSafe})
		}, ErrUnknownNode},
		{"unknown node state", func(t *testing.T) Command {
			return rawCmd(t, TypeSetNodeState, 1, SetNodeState{ID: "a", State: "SLEEPY"})
		}, ErrInvalidCommand},
		{"zero time", func(t *testing.T) Command {
			return rawCmd(t, TypeActivateGeneration, 1, ActivateGeneration{Generation: 3})
		}, ErrInvalidCommand},
		{"unknown field", func(t *testing.T) Command {
			return Command{Type: TypeRemoveNode, Version: 1, Payload: json.RawMessage(`{"id":"a","force":true}`)}
		}, ErrInvalidCommand},
		{"oversize bundle", func(t *testing.T) Command { return rawCmd(t, TypeStageGeneration, 1, big) }, ErrTooLarge},
		{"unknown type", func(t *testing.T) Command {
			return Command{Type: 200, Version: 1, Payload: json.RawMessage(`{}`)}
		}, ErrUnknownCommand},
		{"unknown version", func(t *testing.T) Command {
			return rawCmd(t, TypeRemoveNode, CommandVersion+1, RemoveNode{ID: "a"})
		}, ErrUnknownCommand},
		{"version zero", func(t *testing.T) Command { return rawCmd(t, TypeRemoveNode, 0, RemoveNode{ID: "a"}) }, ErrUnknownCommand},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := seededHarness(t, false)
			before := h.fsm.State()
			err := h.applyCmd(tc.cmd(t))
			if !errors.Is(err, tc.want) || !errors.Is(err, ErrRejected) {
				t.Fatalf("got %v, want %v wrapped in ErrRejected", err, tc.want)
			}
			after := h.fsm.State()
			if !sameExceptIndex(before, after) || after.LastIndex != h.index {
				t.Fatalf("rejected command changed the state")
			}
		})
	}
}

// seededHarness has generation 1 ACTIVE, 2 SUPERSEDED, 4 STAGED and node a.
func seededHarness(t *testing.T, ignoreUnknown bool) *fsmHarness {
	h := newHarness(t, ignoreUnknown)
	h.mustApply(stage(1, 1))
	h.mustApply(&ActivateGeneration{Generation: 1, Time: at(2)})
	h.mustApply(stage(2, 3))
	h.mustApply(stage(4, 4)) // numbers may skip: 3 is never known
	h.mustApply(&UpsertNode{ID: "a", Time: at(5)})
	return h
}

func TestFSMUndecodableEntryIsRejected(t *testing.T) {
	h := seededHarness(t, false)
	before := h.fsm.State()
	h.index++
	res := h.fsm.Apply(&raft.Log{Index: h.index, Type: raft.LogCommand, Data: []byte("\x00garbage")})
	if err, _ := res.(error); !errors.Is(err, ErrRejected) || !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("garbage entry: %v", res)
	}
	if !sameExceptIndex(before, h.fsm.State()) {
		t.Fatal("garbage changed the state")
	}
}

func TestFSMIgnoreUnknown(t *testing.T) {
	h := seededHarness(t, true)
	before := h.fsm.State()
	for _, c := range []Command{
		{Type: 200, Version: 1, Payload: json.RawMessage(`{"anything":1}`)},
		rawCmd(t, TypeRemoveNode, CommandVersion+1, map[string]any{"id": "a", "newField": 1}),
	} {
		if err := h.applyCmd(c); err != nil {
			t.Fatalf("ignored command returned %v", err)
		}
	}
	after := h.fsm.State()
	if !sameExceptIndex(before, after) || after.LastIndex != h.index {
		t.Fatal("ignored command changed the state")
	}
	// Known commands still apply and still get rejected normally.
	if err := h.apply(stage(1, 9)); !errors.Is(err, ErrGenerationNotNewer) {
		t.Fatalf("known rejection with IgnoreUnknown: %v", err)
	}
}

func TestFSMSkipsAlreadyAppliedIndexes(t *testing.T) {
	h := newHarness(t, false)
	h.mustApply(stage(1, 1))
	again := logEntry(t, 1, mustCmd(t, stage(2, 2)))
	if res := h.fsm.Apply(again); res != nil {
		t.Fatalf("replayed index returned %v", res)
	}
	if s := h.fsm.State(); s.Highest != 1 || s.LastIndex != 1 {
		t.Fatalf("replayed index was applied: highest=%d", s.Highest)
	}
	if res := h.fsm.Apply(&raft.Log{Index: 2, Type: raft.LogNoop}); res != nil || h.fsm.State().LastIndex != 1 {
		t.Fatal("non-command entry touched the FSM")
	}
}

func TestFSMPrunesHistory(t *testing.T) {
	h := newHarness(t, false)
	for n := uint64(1); n <= HistoryLimit+20; n++ {
		h.mustApply(stage(n, int(n)))
		h.mustApply(&ActivateGeneration{Generation: n, Time: at(int(n))})
	}
	h.mustApply(stage(HistoryLimit+21, 1000))
	s := h.fsm.State()
	if len(s.Generations) != HistoryLimit {
		t.Fatalf("kept %d generations, want %d", len(s.Generations), HistoryLimit)
	}
	nums := s.GenerationNumbers()
	if nums[0] != 22 || s.Active != HistoryLimit+20 || s.Previous != HistoryLimit+19 {
		t.Fatalf("oldest=%d active=%d previous=%d", nums[0], s.Active, s.Previous)
	}
	withFiles := 0
	for _, g := range s.Generations {
		if g.Files != nil {
			withFiles++
		}
	}
	if withFiles != 3 {
		t.Fatalf("%d generations hold files, want 3 (staged, active, previous)", withFiles)
	}
}

func TestFSMStateIsImmutableAndSubscribeCoalesces(t *testing.T) {
	h := newHarness(t, false)
	ch, cancel := h.fsm.Subscribe()
	defer cancel()
	h.mustApply(stage(1, 1))
	old := h.fsm.State()
	oldJSON := jsonOf(t, old)
	h.mustApply(&ReportReady{Generation: 1, NodeID: "a", Time: at(2)})
	h.mustApply(&ActivateGeneration{Generation: 1, Time: at(3)})
	if jsonOf(t, old) != oldJSON {
		t.Fatal("a published state changed after later applies")
	}
	<-ch // three applies, one pending signal
	select {
	case <-ch:
		t.Fatal("signals did not coalesce")
	default:
	}
	cancel()
	h.mustApply(stage(2, 4))
	select {
	case <-ch:
		t.Fatal("signal after cancel")
	default:
	}
}

func TestFSMSnapshotRestore(t *testing.T) {
	h := seededHarness(t, false)
	h.mustApply(&PutBranch{Record: branchRec("feature", 6)})
	h.mustApply(&PutClaim{Claim: CommandClaim{CommentID: 9, PR: 1, User: "u", Verb: "status", Time: at(6)}})
	var buf bytes.Buffer
	snap, _ := h.fsm.Snapshot()
	if err := snap.Persist(&memSink{Buffer: &buf}); err != nil {
		t.Fatal(err)
	}
	fresh := NewFSM(FSMConfig{})
	ch, cancel := fresh.Subscribe()
	defer cancel()
	if err := fresh.Restore(io.NopCloser(bytes.NewReader(buf.Bytes()))); err != nil {
		t.Fatal(err)
	}
	<-ch
	if got, want := fresh.State(), h.fsm.State(); !sameExceptIndex(got, want) || got.LastIndex != want.LastIndex {
		t.Fatalf("restored state differs:\n got %s\nwant %s", jsonOf(t, got), jsonOf(t, want))
	}
	// A bad snapshot leaves the old state in place.
	before := fresh.State()
	for _, bad := range []string{`{"format":99,"state":{}}`, `{"format":1}`, `{"format":1,"state":`} {
		if err := fresh.Restore(io.NopCloser(strings.NewReader(bad))); err == nil {
			t.Fatalf("restore of %q succeeded", bad)
		}
	}
	if fresh.State() != before {
		t.Fatal("failed restore replaced the state")
	}
}

func TestNewCommandRefusesOversizeBundle(t *testing.T) {
	s := stage(1, 1)
	s.Files["big.bin"] = make([]byte, MaxInlineBundleBytes)
	_, err := NewCommand(s)
	if !errors.Is(err, ErrTooLarge) || !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("NewCommand oversize: %v", err)
	}
	s.Files["big.bin"] = make([]byte, MaxInlineBundleBytes-1024)
	if _, err := NewCommand(s); err != nil {
		t.Fatalf("bundle just under the limit: %v", err)
	}
}

// memSink is a raft.SnapshotSink over a buffer.
type memSink struct {
	*bytes.Buffer
	cancelled bool
}

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Cancel() error { s.cancelled = true; return nil }
func (s *memSink) Close() error  { return nil }
