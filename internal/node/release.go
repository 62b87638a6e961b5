package node

import (
	"runtime/debug"
	"sync"

	"github.com/policyrollout/reconciler/internal/policy"
)

// releaseListBytes is the list text from which serving a generation
// hands the memory the node no longer uses back to the system. Applying
// and compiling a 16 MB list (1,000,000 entries) leaves tens of megabytes
// of garbage: the raft entries its chunks came in, the compile's scratch
// and, on the leader, the fetch and the chunks it proposed; serving it
// drops the generation before the previous one. Left to the runtime, that
// garbage stays resident until the heap grows into it again, as much again
// as the node holds for the list (docs/performance.md). A forced
// collection and release costs tens of milliseconds of CPU for a heap of
// that size, once per generation with such lists on each node, off the
// loader's goroutine and never on the decision path.
const releaseListBytes = 4 << 20

// releaseMemory collects the garbage and returns the free pages to the
// system (a variable so that tests can count the calls).
var releaseMemory = debug.FreeOSMemory

// listBytes is the bytes of the list files (policy.IsListFile) among
// files, named relative to the policies root.
func listBytes(files map[string][]byte) int {
	n := 0
	for name, data := range files {
		if policy.IsListFile(name) {
			n += len(data)
		}
	}
	return n
}

// serially returns an offload that runs each function on a goroutine of
// its own, one at a time.
func serially() func(func()) {
	var mu sync.Mutex
	return func(f func()) {
		go func() {
			mu.Lock()
			defer mu.Unlock()
			f()
		}()
	}
}
