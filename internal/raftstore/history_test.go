package raftstore

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/version"
)

// stageV100 is StageGeneration as release 1.0.0 declares it: the payload
// it decodes strictly (decodePayload) when it applies a Stage.
type stageV100 struct {
	Generation uint64              `json:"generation"`
	Commit     string              `json:"commit"`
	Files      map[string][]byte   `json:"files"`
	Etags      map[string]string   `json:"etags"`
	CreateTime time.Time           `json:"createTime"`
	Chunked    map[string][]string `json:"chunked,omitempty"`
}

var rollbackHistory = History{Author: "Alice <alice@example.com>", RollbackOf: 3, RequestedBy: "ops (admin)"}

// A Stage with history is version 3, which 1.0.0 refuses twice over (its
// newest Stage version is 2, and it refuses unknown fields); without
// history it stays what 1.0.0 writes.
func TestStageHistoryIsANewVersionOlderNodesRefuse(t *testing.T) {
	plain := mustCmd(t, stage(1, 1))
	if plain.Version != 1 {
		t.Fatalf("stage without history = version %d, want 1", plain.Version)
	}
	if err := decodePayload(plain.Payload, &stageV100{}); err != nil {
		t.Fatalf("1.0.0 refuses a stage without history: %v", err)
	}
	p := stage(1, 1)
	p.History = rollbackHistory
	c := mustCmd(t, p)
	if c.Version != StageHistoryVersion {
		t.Fatalf("stage with history = version %d, want %d", c.Version, StageHistoryVersion)
	}
	if err := decodePayload(c.Payload, &stageV100{}); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("1.0.0 decoding a stage with history: %v, want a refusal", err)
	}
	if got := Requires(c); got.String() != "1.1.0" {
		t.Fatalf("a stage with history requires %s, want 1.1.0", got)
	}
	c.Version = StageChunkedVersion
	if err := newHarness(t, false).applyCmd(c); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("version 2 with history: %v, want ErrInvalidCommand", err)
	}
}

// The generation record keeps the history, and a too long author is
// refused before the log.
func TestStageRecordsHistory(t *testing.T) {
	h := newHarness(t, false)
	p := stage(1, 1)
	p.History = rollbackHistory
	h.mustApply(p)
	if got := h.fsm.State().Generations[1].History; got != rollbackHistory {
		t.Fatalf("generation history = %+v, want %+v", got, rollbackHistory)
	}
	long := stage(2, 2)
	long.Author = strings.Repeat("a", MaxHistoryText+1)
	if _, err := NewCommand(long); !errors.Is(err, ErrInvalidCommand) {
		t.Fatalf("a %d-byte author: %v, want ErrInvalidCommand", len(long.Author), err)
	}
}

// While a member runs 1.0.0, ProposeGeneration stages without the history
// (the generation matters more than its label); after the upgrade, with.
func TestProposeGenerationWaitsForTheClusterVersionForHistory(t *testing.T) {
	s := soloInmem(t, nil)
	cluster := version.Must(version.Oldest)
	s.SetClusterVersion(func() version.V { return cluster })
	p := stage(1, 1)
	p.History = rollbackHistory
	if _, err := s.Propose(ctxT(t), p); !errors.Is(err, ErrNotYet) {
		t.Fatalf("a version 3 stage at 1.0.0: %v, want ErrNotYet", err)
	}
	if _, _, err := ProposeGeneration(ctxT(t), s, p); err != nil {
		t.Fatal(err)
	}
	if g := s.State().Generations[1]; !g.History.IsZero() {
		t.Fatalf("history at 1.0.0 = %+v, want none", g.History)
	}
	cluster = version.Must("1.1.0")
	p = stage(2, 2)
	p.History = rollbackHistory
	if _, _, err := ProposeGeneration(ctxT(t), s, p); err != nil {
		t.Fatal(err)
	}
	if g := s.State().Generations[2]; g.History != rollbackHistory {
		t.Fatalf("history at 1.1.0 = %+v, want %+v", g.History, rollbackHistory)
	}
}
