package system

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Environment variables that change what the package does.
const (
	// EnvBench enables the TestBench* measurements.
	EnvBench = "RECONCILER_SYSTEM_BENCH"
	// EnvRace builds the daemon with the race detector.
	EnvRace = "RECONCILER_SYSTEM_RACE"
	// EnvLogs prints the tail of every node's log (that many lines) even
	// when the test passed.
	EnvLogs = "RECONCILER_SYSTEM_LOGS"
)

var build struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// Binary returns the path of a reconciler binary built once per test run
// from the module that holds this package. A failed build fails the test.
func Binary(t testing.TB) string {
	t.Helper()
	build.once.Do(func() { build.path, build.err = buildBinary() })
	if build.err != nil {
		t.Fatalf("build reconciler: %v", build.err)
	}
	return build.path
}

// CleanupBinary removes the directory Binary built into; TestMain calls it.
func CleanupBinary() {
	if build.dir != "" {
		_ = os.RemoveAll(build.dir)
	}
}

func buildBinary() (string, error) {
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "reconciler-system-")
	if err != nil {
		return "", err
	}
	build.dir = dir
	out := filepath.Join(dir, "reconciler")
	args := []string{"build", "-o", out}
	if os.Getenv(EnvRace) != "" {
		args = append(args, "-race")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", append(args, "./cmd/reconciler")...)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build ./cmd/reconciler in %s: %v\n%s", root, err, stderr.String())
	}
	return out, nil
}

// moduleRoot is the directory of the go.mod that holds this package.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("go env GOMOD: not inside a module")
	}
	return filepath.Dir(mod), nil
}
