package raftstore

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// soloInmem is a single bootstrapped in-memory node, already leader.
func soloInmem(t *testing.T, now func() time.Time) *Store {
	_, trans := raft.NewInmemTransport("")
	s, err := Open(Config{NodeID: "solo", Transport: trans, InMemory: true, Bootstrap: true,
		Timeouts: testTimeouts, Logger: testLogger(t, "solo"), Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	eventually(t, 10*time.Second, "leadership", s.IsLeader)
	return s
}

func TestStoreApplyRefusesInvalidCommandsBeforeTheLog(t *testing.T) {
	s := soloInmem(t, nil)
	big := stage(1, 1)
	big.Files["big.bin"] = make([]byte, MaxInlineBundleBytes)
	raw, _ := json.Marshal(big)
	cases := map[string]struct {
		cmd  Command
		want error
	}{
		"oversize bundle":  {Command{Type: TypeStageGeneration, Version: 1, Payload: raw}, ErrTooLarge},
		"unknown type":     {Command{Type: 200, Version: 1, Payload: json.RawMessage(`{}`)}, ErrUnknownCommand},
		"missing time":     {Command{Type: TypeActivateGeneration, Version: 1, Payload: json.RawMessage(`{"generation":1}`)}, ErrInvalidCommand},
		"undecodable body": {Command{Type: TypeRemoveNode, Version: 1, Payload: json.RawMessage(`[1]`)}, ErrInvalidCommand},
	}
	before := s.Stats()["last_log_index"]
	for name, tc := range cases {
		if _, err := s.Apply(ctxT(t), tc.cmd); !errors.Is(err, tc.want) || errors.Is(err, ErrRejected) {
			t.Errorf("%s: got %v, want %v before the log", name, err, tc.want)
		}
	}
	if after := s.Stats()["last_log_index"]; after != before {
		t.Fatalf("invalid commands reached the log: last index %s -> %s", before, after)
	}
}

func TestStoreProposeStampsTimeFromNow(t *testing.T) {
	fixed := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	s := soloInmem(t, func() time.Time { return fixed })
	propose(t, s, &StageGeneration{Generation: 1, Commit: "abc", Files: map[string][]byte{"a": nil}})
	explicit := at(7)
	propose(t, s, &ActivateGeneration{Generation: 1, Time: explicit})
	g, _ := s.State().ActiveGeneration()
	if !g.CreateTime.Equal(fixed) || !g.ActivateTime.Equal(explicit) {
		t.Fatalf("create=%v activate=%v: zero times come from Now, set ones are kept", g.CreateTime, g.ActivateTime)
	}
	// A value (not a pointer) cannot be stamped, and a zero time is refused.
	if _, err := s.Propose(ctxT(t), ReportReady{Generation: 1, NodeID: "a"}); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("value payload without time: %v", err)
	}
}

func TestStoreApplyHonoursContext(t *testing.T) {
	s := soloInmem(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := s.Propose(ctx, stage(1, 1))
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled context: %v", err)
	}
	if err := s.WaitForIndex(ctx, 1<<40); !errors.Is(err, context.Canceled) {
		t.Fatalf("WaitForIndex with a cancelled context: %v", err)
	}
	id, addr, err := s.WaitForLeader(ctxT(t))
	if err != nil || id != "solo" || addr != s.Addr() {
		t.Fatalf("WaitForLeader = %s %s %v", id, addr, err)
	}
}
