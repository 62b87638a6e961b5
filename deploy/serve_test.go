package deploy_test

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/policyrollout/reconciler/test/harness"
)

// serveLikeTheImage runs exe (the binary taken from the image) as the
// image would: `serve` with an empty environment (no PATH, no HOME), the
// image's non-root user when the test runs as root, its data directory
// as the working directory, following an http git server. The node must
// load a first generation (/readyz 200), so nothing it needs is missing
// from the image (the git CLI, a shell, a home directory), and stop with
// status 0 on SIGTERM.
func serveLikeTheImage(t *testing.T, exe string) {
	t.Helper()
	repo := harness.NewRepo(t, harness.RepoOptions{})
	root := t.TempDir()
	data := filepath.Join(root, "data")
	addrs := harness.FreeAddrs(t, 2)
	cfg := filepath.Join(root, "config.toml")
	toml := fmt.Sprintf("[node]\nid = \"n1\"\ndata_dir = %q\nhttp_addr = %q\nraft_addr = %q\nbootstrap = true\n"+
		"[git]\nurl = %q\ninit_from = \"\"\npoll = \"@every 1s\"\n", data, addrs[0], addrs[1], repo.URL)
	if err := os.WriteFile(cfg, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "serve", "--config", cfg)
	cmd.Dir, cmd.Env = data, []string{}
	if os.Geteuid() == 0 {
		uid, gid := containerfileUser(t)
		openToAll(t, root)
		openToAll(t, filepath.Dir(exe))
		if err := os.Chown(data, uid, gid); err != nil {
			t.Fatal(err)
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}}
	}
	var log strings.Builder
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	err := harness.Eventually(harness.ReadyTimeout, func() error {
		resp, err := http.Get("http://" + addrs[0] + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/readyz %d", resp.StatusCode)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("the image's binary never served a generation: %v\n%s", err, log.String())
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("the image's binary exited with %v after SIGTERM, want 0\n%s", err, log.String())
	}
}

// openToAll lets every user traverse dir and its parents up to the
// temporary directory (t.TempDir makes them 0700), so that the image's
// user reaches the binary and the config.
func openToAll(t *testing.T, dir string) {
	t.Helper()
	for d := dir; strings.HasPrefix(d, os.TempDir()+string(filepath.Separator)); d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}
