package backup

import (
	"fmt"
	"io"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/policyrollout/reconciler/internal/raftstore"
)

// BenchmarkStreamSnapshot measures what streaming a snapshot file costs
// the leader once raft has written the snapshot: the bytes allocated
// while the file is written out (stream-B/op) stay flat as the state
// grows, since the body is copied from raft's snapshot store in pieces.
func BenchmarkStreamSnapshot(b *testing.B) {
	for _, mib := range []int{1, 16} {
		b.Run(fmt.Sprintf("%dMiB", mib), func(b *testing.B) {
			s, err := raftstore.Open(raftstore.Config{NodeID: "a", RaftAddr: "127.0.0.1:0",
				DataDir: filepath.Join(b.TempDir(), "raft"), Bootstrap: true})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			waitLeader(b, s)
			// One generation of mib distinct 1 MiB files, staged in chunks
			// as the leader stages a large bundle.
			files := map[string][]byte{}
			for i := range mib {
				data := make([]byte, 1<<20)
				_, _ = rand.NewChaCha8([32]byte{byte(i)}).Read(data)
				files[fmt.Sprintf("web/list-%d.txt", i)] = data
			}
			p := &raftstore.StageGeneration{Generation: 1, Commit: "c", Files: files}
			if _, _, err := raftstore.ProposeGeneration(b.Context(), s, p); err != nil {
				b.Fatal(err)
			}
			var streamed, size uint64
			for b.Loop() {
				snap, err := s.OpenBackup()
				if err != nil {
					b.Fatal(err)
				}
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				if err := Write(io.Discard, headerOf(snap, "a", time.Unix(0, 0)), snap.Body); err != nil {
					b.Fatal(err)
				}
				runtime.ReadMemStats(&after)
				streamed += after.TotalAlloc - before.TotalAlloc
				size = uint64(snap.Meta.Size)
				snap.Close()
			}
			b.ReportMetric(float64(streamed)/float64(b.N), "stream-B/op")
			b.ReportMetric(float64(size), "snapshot-bytes")
		})
	}
}

func waitLeader(tb testing.TB, s *raftstore.Store) {
	tb.Helper()
	for !s.IsLeader() {
		runtime.Gosched()
	}
}
