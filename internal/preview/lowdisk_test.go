package preview_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/policyrollout/reconciler/internal/preview"
)

// TestLogStopsBelowWatermark (issue 16, attack 8): a flood of mirrored
// traffic filled the disk with preview.log and raft then failed to commit.
// Below the free-space watermark the log writes nothing and counts what it
// dropped; once there is room again it writes. The watermark is set above
// any real disk's free space, so the test runs on the real file system.
func TestLogStopsBelowWatermark(t *testing.T) {
	path := filepath.Join(t.TempDir(), preview.LogFileName)
	f, err := preview.OpenRotating(path, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.SetMinFree(1 << 62)
	if _, err := f.Write([]byte("x\n")); !errors.Is(err, preview.ErrLowDisk) {
		t.Fatalf("write below the watermark: %v", err)
	}

	h := newHarness(t, preview.Config{UnchangedEvery: 1, Log: f}, webPolicy())
	h.set(start(t, create(t, nil, "x", tightWeb()), t0))
	h.offer("web", craftedTraffic(200)...)
	h.sh.Stop(t.Context()) // flushes
	st := h.sh.Status()
	if st.LogDropped == 0 || st.LogErrors != 0 || st.Message == "" {
		t.Errorf("status %+v, want dropped lines counted", st)
	}
	if data, _ := os.ReadFile(path); len(data) != 0 {
		t.Errorf("%d bytes written below the watermark", len(data))
	}

	f.SetMinFree(0)
	if _, err := f.Write([]byte("x\n")); err != nil {
		t.Fatalf("write with room again: %v", err)
	}
}
