package raftstore

import (
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// BenchmarkFSMApplySmall measures the copy-on-write cost of a small
// command against a full state: three generations of 500 files each, 50
// generation records, 50 nodes.
func BenchmarkFSMApplySmall(b *testing.B) {
	h := fullHarness(b)
	cmd := mustCmd(b, &SetNodeState{ID: "n1", State: NodeActive})
	b.ResetTimer()
	for range b.N {
		if err := h.applyCmd(cmd); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFSMApplyTxn is one logical write of the leader (an experiment
// and its operation) on the same full state: the Txn applies to a second
// copy, so it costs about two small commands.
func BenchmarkFSMApplyTxn(b *testing.B) {
	h := fullHarness(b)
	txn, err := NewTxn(expPut("policies/web/experiments/pr-1"), &PutOperation{ID: "op", Data: []byte(`{"done":true}`)})
	if err != nil {
		b.Fatal(err)
	}
	cmd := mustCmd(b, txn)
	b.ResetTimer()
	for range b.N {
		if err := h.applyCmd(cmd); err != nil {
			b.Fatal(err)
		}
	}
}

// fullHarness holds three generations of 500 files each, 50 generation
// records and 50 nodes.
func fullHarness(b *testing.B) *fsmHarness {
	h := newHarness(b, false)
	for n := uint64(1); n <= 50; n++ {
		s := stage(n, int(n))
		for i := range 500 {
			s.Files[fmt.Sprintf("policies/p%d.yaml", i)] = make([]byte, 1024)
		}
		h.mustApply(s)
		if n < 50 {
			h.mustApply(&ActivateGeneration{Generation: n, Time: at(int(n))})
		}
	}
	for i := range 50 {
		h.mustApply(&UpsertNode{ID: fmt.Sprint("n", i), Time: at(1)})
	}
	return h
}

// BenchmarkStorePromotion measures a Stage plus an Activate through a
// single-node Store on disk (bolt in the test's temp dir), with the
// applied index persisted synchronously before publication (the default)
// and with the background persister only. Each synchronous persist is one
// more fsynced bolt transaction on the FSM goroutine.
func BenchmarkStorePromotion(b *testing.B) {
	for _, mode := range []string{"sync", "background-only"} {
		b.Run(mode, func(b *testing.B) {
			s := benchStore(b)
			if mode != "sync" {
				s.fsm.setPersist(nil)
			}
			b.ResetTimer()
			for n := uint64(1); n <= uint64(b.N); n++ {
				benchPropose(b, s, stage(n, 1))
				benchPropose(b, s, &ActivateGeneration{Generation: n, Time: at(2)})
			}
		})
	}
}

// BenchmarkStoreSmall is the hot path: never persisted synchronously.
func BenchmarkStoreSmall(b *testing.B) {
	s := benchStore(b)
	benchPropose(b, s, &UpsertNode{ID: "n1", Time: at(1)})
	b.ResetTimer()
	for range b.N {
		benchPropose(b, s, &SetNodeState{ID: "n1", State: NodeActive})
	}
}

func benchStore(b *testing.B) *Store {
	s, err := Open(Config{NodeID: "solo", RaftAddr: "127.0.0.1:0", DataDir: b.TempDir(), Bootstrap: true,
		Timeouts: testTimeouts, Logger: testLogger(b, "solo")})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	if _, _, err := s.WaitForLeader(ctxT(b)); err != nil {
		b.Fatal(err)
	}
	eventually(b, 10*time.Second, "leadership", s.IsLeader)
	return s
}

func benchPropose(b *testing.B, s *Store, p Payload) {
	if _, err := s.Propose(ctxT(b), p); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkFSMApplyPromotion isolates the apply path: Stage plus Activate
// entries fed to the FSM, with the synchronous persist into a bolt file
// (two fsynced bolt transactions per iteration) and without.
func BenchmarkFSMApplyPromotion(b *testing.B) {
	for _, mode := range []string{"sync", "none"} {
		b.Run(mode, func(b *testing.B) {
			h := newHarness(b, false)
			if mode == "sync" {
				bolt, err := raftboltdb.NewBoltStore(filepath.Join(b.TempDir(), boltFile))
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = bolt.Close() })
				p := startPersister(h.fsm, bolt, testLogger(b, "persister"))
				p.stopBackground()
			}
			b.ResetTimer()
			for n := uint64(1); n <= uint64(b.N); n++ {
				if err := h.apply(stage(n, 1)); err != nil {
					b.Fatal(err)
				}
				if err := h.apply(&ActivateGeneration{Generation: n, Time: at(2)}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkSealUnseal is the checksum's cost per stored and read entry:
// a small command and a bundle at MaxInlineBundleBytes.
func BenchmarkSealUnseal(b *testing.B) {
	for _, size := range []int{1 << 10, MaxInlineBundleBytes} {
		b.Run(strconv.Itoa(size), func(b *testing.B) {
			l := &raft.Log{Index: 9, Term: 2, Type: raft.LogCommand, Data: make([]byte, size)}
			b.SetBytes(int64(size))
			for b.Loop() {
				if err := unseal(seal(l)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
