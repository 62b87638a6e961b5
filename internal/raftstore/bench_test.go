package raftstore

import (
	"fmt"
	"testing"
)

// BenchmarkFSMApplyHeartbeat measures the copy-on-write cost of a small
// command against a full state: three generations of 500 files each, 50
// generation records, 50 nodes.
func BenchmarkFSMApplyHeartbeat(b *testing.B) {
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
	cmd := mustCmd(b, &Heartbeat{ID: "n1", Time: at(2)})
	b.ResetTimer()
	for range b.N {
		if err := h.applyCmd(cmd); err != nil {
			b.Fatal(err)
		}
	}
}
