package gitsource

import (
	"runtime"
	"runtime/metrics"
	"testing"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/hashicorp/go-hclog"
)

// BenchmarkReadEndOfChain reads, from the pack housekeeping wrote over 21
// versions of two 1,000,000-entry lists (one losing a line per push, one
// gaining one), the version at the end of the longest delta chain: main's
// of the shrinking list, the oldest of the growing one. Each is read by
// go-git (what the clone did before chainread.go) and by readChain, each
// time through a new Source, so no cache helps. peak-heap-MB is the most
// the heap grew during a read.
func BenchmarkReadEndOfChain(b *testing.B) {
	r := shrinkingAndGrowing(b, 1_000_000, 20)
	chain := maxChain(b, r.srv, r.dir)
	for _, c := range []struct{ name, commit, file string }{
		{"main-shrinking", r.commits[len(r.commits)-1], "_lists/shrinking.netset"},
		{"oldest-growing", r.commits[0], "_lists/growing.netset"},
	} {
		content := r.revs[c.commit][c.file]
		h := plumbing.ComputeHash(plumbing.BlobObject, []byte(content))
		for _, reader := range []string{"go-git", "chain"} {
			b.Run(c.name+"/"+reader, func(b *testing.B) {
				b.ReportAllocs()
				var rise uint64
				for b.Loop() {
					b.StopTimer()
					s := newSource(b, Config{URL: r.url, Path: ".", Dir: r.dir, Logger: hclog.NewNullLogger()})
					settle()
					var peak uint64
					base := heapObjects()
					stop := sampleHeap(&peak)
					b.StartTimer()
					data, err := readWith(s, h, reader == "chain")
					stop()
					if err != nil || string(data) != content {
						b.Fatalf("reading %s at %s: %v", c.file, c.commit, err)
					}
					rise = max(rise, peak-min(peak, base))
				}
				b.ReportMetric(float64(chain), "max-chain")
				b.ReportMetric(float64(len(content))/(1<<20), "file-MB")
				b.ReportMetric(float64(rise)/(1<<20), "peak-heap-MB")
			})
		}
	}
}

// heapObjects is the heap's size now, as sampleHeap measures it: the
// benchmarks keep every version they pushed, and report what a read adds.
func heapObjects() uint64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	return sample[0].Value.Uint64()
}

// readWith reads the blob h through readBlob, or as the clone did before
// chainread.go: go-git only, through a storage with its default cache.
func readWith(s *Source, h plumbing.Hash, chain bool) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.repo.Storer
	if !chain {
		st = filesystem.NewStorageWithOptions(osfs.New(s.cfg.Dir), cache.NewObjectLRUDefault(),
			filesystem.Options{LargeObjectThreshold: largeObjectBytes})
	}
	blob, err := object.GetBlob(st, h)
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(st)
	if chain {
		return readBlob(s.repo.Storer, blob)
	}
	return readAll(blob)
}
