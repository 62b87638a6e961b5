package preview

import (
	"testing"
	"unsafe"

	"github.com/policyrollout/reconciler/internal/engine"
)

// TestRequestStructBytes: requestSize counts engine.Request as the size
// class the runtime allocates it in (classes are 16 bytes apart there).
func TestRequestStructBytes(t *testing.T) {
	if n := unsafe.Sizeof(engine.Request{}); n > requestStructBytes || n <= requestStructBytes-16 {
		t.Fatalf("engine.Request is %d bytes; requestStructBytes (%d) is not its size class", n, requestStructBytes)
	}
}
