package raftstore

import (
	"bytes"
	"io"
	"runtime"
	"runtime/metrics"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// BenchmarkWriteSnapshotList compares the streamed snapshot with the
// whole-value encoder it replaced, for a state holding a 1,000,000-line
// list (about 16 MB of chunks): time, bytes allocated per snapshot, and
// the peak of live heap above the state while writing (peak-MB, sampled).
func BenchmarkWriteSnapshotList(b *testing.B) {
	s := listState(b, 1_000_000)
	var size countWriter
	if err := WriteSnapshot(&size, s); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		write func(io.Writer, *State) error
	}{{"whole", wholeSnapshot}, {"stream", WriteSnapshot}} {
		b.Run(c.name+"/persist", func(b *testing.B) {
			// What raft does: Persist into its file snapshot store (CRC,
			// buffered file, fsync on Close), so the time is a node's.
			store, err := raft.NewFileSnapshotStoreWithLogger(b.TempDir(), 1, hclog.NewNullLogger())
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				sink, err := store.Create(raft.SnapshotVersionMax, s.LastIndex, 1, raft.Configuration{}, 0, nil)
				if err != nil {
					b.Fatal(err)
				}
				if err := c.write(sink, s); err != nil {
					b.Fatal(err)
				}
				if err := sink.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			peak := 0.0
			for b.Loop() {
				p := peakHeap(func() {
					if err := c.write(io.Discard, s); err != nil {
						b.Fatal(err)
					}
				})
				peak = max(peak, p)
			}
			b.ReportMetric(peak/(1<<20), "peak-MB")
		})
	}
}

// peakHeap returns the highest live heap seen while f ran, above the heap
// before it, sampling runtime/metrics (which does not stop the world).
func peakHeap(f func()) float64 {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	base := read()
	var high atomic.Uint64
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			if v := read(); v > high.Load() {
				high.Store(v)
			}
			select {
			case <-done:
				return
			case <-time.After(50 * time.Microsecond):
			}
		}
	}()
	f()
	if v := read(); v > high.Load() {
		high.Store(v)
	}
	close(done)
	<-stopped
	return float64(high.Load()) - float64(base)
}

// BenchmarkReadSnapshotList is the restore side of the same state: the
// whole-document decoder restoring used to be (json.Decoder buffers all of
// the document) against the two-pass reader (snapread.go). peak-MB is
// the transient heap a restoring node pays on top of what it held before,
// the restored state included.
func BenchmarkReadSnapshotList(b *testing.B) {
	var snap bytes.Buffer
	if err := WriteSnapshot(&snap, listState(b, 1_000_000)); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		decode func(io.Reader) (*snapshotFile, error)
	}{{"whole", wholeDecode}, {"stream", decodeSnapshotFile}} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(snap.Len()))
			b.ReportAllocs()
			peak := 0.0
			for b.Loop() {
				peak = max(peak, peakHeap(func() {
					file, err := c.decode(bytes.NewReader(snap.Bytes()))
					if err != nil {
						b.Fatal(err)
					}
					if _, _, err := finishSnapshot(file); err != nil {
						b.Fatal(err)
					}
				}))
			}
			b.ReportMetric(peak/(1<<20), "peak-MB")
		})
	}
}
