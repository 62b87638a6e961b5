package webhook

import (
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// zeros is an endless reader of '0' bytes that allocates nothing per read.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = '0'
	}
	return len(p), nil
}

// heapPeak samples the heap in use until stop is closed and returns the
// largest value seen. It measures; it asserts nothing about time.
func heapPeak(stop <-chan struct{}) <-chan uint64 {
	out := make(chan uint64, 1)
	go func() {
		var peak uint64
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapInuse)
			select {
			case <-stop:
				out <- peak
				return
			default:
				runtime.Gosched()
			}
		}
	}()
	return out
}

// maxFloodHeap is the documented bound (docs/security.md) on the heap while
// 40 clients post 25 MiB bodies at once: DefaultMaxUnverified bodies of at
// most MaxBodyBytes each, twice over since the garbage collector lets the
// heap grow to twice what is live (GOGC=100) before it collects the bodies
// already refused, plus the rest of the test.
const maxFloodHeap = 2*DefaultMaxUnverified*MaxBodyBytes + 32<<20

// TestWebhookFlood (issue 16, attack 5): 40 concurrent 25 MiB posts,
// unsigned or with a well-formed but wrong signature, took a node to
// 1.6 GB, since every body was read before its signature was checked.
// Unsigned posts are now refused before any body is read, and at most
// DefaultMaxUnverified bodies are read at a time; the others get 503.
func TestWebhookFlood(t *testing.T) {
	for _, sig := range []string{"", "sha256=" + strings.Repeat("ab", 32)} {
		t.Run("signature "+sig, func(t *testing.T) {
			rec := &recorder{}
			h := New(Config{Secret: []byte(secret), Trigger: rec, Commands: rec})
			srv := httptest.NewServer(h)
			defer srv.Close()
			runtime.GC()

			stop := make(chan struct{})
			peak := heapPeak(stop)
			var wg sync.WaitGroup
			var codes [600]atomic.Int32
			for range 40 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					req, _ := http.NewRequest("POST", srv.URL+Path, io.LimitReader(zeros{}, MaxBodyBytes))
					req.ContentLength = MaxBodyBytes
					req.Header.Set("X-GitHub-Event", "push")
					if sig != "" {
						req.Header.Set("X-Hub-Signature-256", sig)
					}
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						codes[599].Add(1) // the server closed while the body was sent
						return
					}
					codes[resp.StatusCode].Add(1)
					resp.Body.Close()
				}()
			}
			wg.Wait()
			close(stop)
			got := <-peak
			t.Logf("heap in use peaked at %d MiB (bound %d MiB); answers: 401=%d 503=%d cut=%d",
				got>>20, maxFloodHeap>>20, codes[401].Load(), codes[503].Load(), codes[599].Load())
			if got > maxFloodHeap {
				t.Errorf("heap peaked at %d MiB, over the %d MiB bound", got>>20, maxFloodHeap>>20)
			}
			if rec.calls() != 0 || codes[401].Load() == 0 {
				t.Errorf("calls %d, 401s %d", rec.calls(), codes[401].Load())
			}
		})
	}
}
