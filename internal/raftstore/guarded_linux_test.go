package raftstore

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestGuardedTurnsSIGBUSIntoError reproduces what a truncated raft.db does
// to bolt: a read through a mapping past the end of the file.
func TestGuardedTurnsSIGBUSIntoError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, make([]byte, 2*4096), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mem, err := syscall.Mmap(int(f.Fd()), 0, 2*4096, syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(mem)
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	err = guarded(func() error {
		if mem[4096] != 0 { // faults: the page is past the end of the file now
			t.Log("read a byte")
		}
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "invalid memory address") {
		t.Fatalf("guarded = %v, want a recovered fault", err)
	}
}
