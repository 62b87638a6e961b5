package raftstore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"testing"
)

// randomPayload draws from a small domain so sequences hit every handler,
// both accepted and rejected paths: numbers collide, nodes repeat, states
// conflict.
func randomPayload(r *rand.Rand, sec int) Payload {
	// Numbers drift upwards with time, so stages keep succeeding while
	// stale numbers and collisions still occur.
	gen := uint64(1 + sec/4 + r.IntN(4))
	node := []string{"a", "b", "c"}[r.IntN(3)]
	ts := at(sec)
	switch r.IntN(13) {
	case 0, 1, 2:
		s := stage(gen, sec)
		if r.IntN(2) == 0 {
			s.Files = nil // exercises nil versus empty maps
		}
		return s
	case 3:
		return &ReportReady{Generation: gen, NodeID: node, Time: ts}
	case 4:
		return &ReportFailed{Generation: gen, NodeID: node, Errors: []string{fmt.Sprint("err ", sec)}, Time: ts}
	case 5, 6:
		return &ActivateGeneration{Generation: gen, Time: ts}
	case 7:
		return &MarkInvalid{Generation: gen, Errors: []string{"bad"}, Time: ts}
	case 8:
		return &UpsertNode{ID: node, RaftAddr: node + ":7000", Group: []string{"g1", "g2"}[r.IntN(2)], Voter: r.IntN(2) == 0, Time: ts}
	case 9:
		states := []NodeState{NodeActive, NodeTest, NodeSafe, NodePassive, NodeTerminated}
		return &SetNodeState{ID: node, State: states[r.IntN(len(states))]}
	case 10:
		return randomRecord(r, sec)
	case 11:
		name := fmt.Sprintf("policies/p/experiments/pr-%d", r.IntN(3))
		if r.IntN(3) == 0 {
			return &DeleteExperiment{Name: name}
		}
		return &PutExperiment{Name: name, Data: json.RawMessage(fmt.Sprintf(`{"v":%d}`, sec))}
	default:
		id := fmt.Sprintf("op-%d", r.IntN(3))
		if r.IntN(3) == 0 {
			return &DeleteOperation{ID: id}
		}
		if r.IntN(4) == 0 {
			return &RemoveNode{ID: node}
		}
		return &PutOperation{ID: id, Data: json.RawMessage(`{"done":true}`)}
	}
}

// TestPropertySnapshotRestoreRoundTrip: for random command sequences, a
// snapshot restored into a fresh FSM equals the original, and both stay
// equal while the rest of the sequence is applied to each.
func TestPropertySnapshotRestoreRoundTrip(t *testing.T) {
	for seed := uint64(1); seed <= 150; seed++ {
		r := rand.New(rand.NewPCG(seed, 0x5eed))
		cmds := make([]Command, 80)
		for i := range cmds {
			cmds[i] = mustCmd(t, randomPayload(r, i))
		}
		cut := r.IntN(len(cmds))
		orig := newHarness(t, false)
		for _, c := range cmds[:cut] {
			_ = orig.applyCmd(c)
		}
		restored := roundTrip(t, orig.fsm)
		if !reflect.DeepEqual(restored.State(), orig.fsm.State()) {
			t.Fatalf("seed %d: restored state differs:\n got %s\nwant %s", seed,
				jsonOf(t, restored.State()), jsonOf(t, orig.fsm.State()))
		}
		twin := &fsmHarness{t: t, fsm: restored, index: orig.index}
		for i, c := range cmds[cut:] {
			e1, e2 := orig.applyCmd(c), twin.applyCmd(c)
			if fmt.Sprint(e1) != fmt.Sprint(e2) {
				t.Fatalf("seed %d cmd %d: results diverge: %v vs %v", seed, cut+i, e1, e2)
			}
		}
		if !reflect.DeepEqual(twin.fsm.State(), orig.fsm.State()) {
			t.Fatalf("seed %d: states diverge after restore and further applies", seed)
		}
	}
}

func roundTrip(t *testing.T, f *FSM) *FSM {
	t.Helper()
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := snap.Persist(&memSink{Buffer: &buf}); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	fresh := NewFSM(FSMConfig{})
	if err := fresh.Restore(io.NopCloser(&buf)); err != nil {
		t.Fatal(err)
	}
	return fresh
}
