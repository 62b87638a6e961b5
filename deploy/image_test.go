package deploy_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/test/harness"
)

// imageConfig is the part of an image's config (OCI/Docker image spec)
// the deployment relies on.
type imageConfig struct {
	Config struct {
		User         string              `json:"User"`
		Entrypoint   []string            `json:"Entrypoint"`
		Cmd          []string            `json:"Cmd"`
		Volumes      map[string]struct{} `json:"Volumes"`
		ExposedPorts map[string]struct{} `json:"ExposedPorts"`
		WorkingDir   string              `json:"WorkingDir"`
	} `json:"config"`
	RootFS struct {
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

// TestImage builds deploy/Containerfile with podman from what `make
// build` writes, as `make image` does, then reads the saved image: its
// config (non-root user, the data volume, entrypoint, ports) and its
// layers, whose binary must be static and must run `version`, `validate`
// and `serve` (containers cannot run here, so the binary runs outside one,
// as the image would run it: serveLikeTheImage).
func TestImage(t *testing.T) {
	t.Parallel()
	root := harness.ModuleRoot()
	ctxDir := t.TempDir()
	bin := filepath.Join(ctxDir, "reconciler")
	run(t, root, "make", "--no-print-directory", "image", "BIN="+bin,
		"IMAGE="+imageTag(t), "GO="+goBin(t))
	t.Cleanup(func() { _ = exec.Command("podman", "rmi", "-f", imageTag(t)).Run() })

	archive := filepath.Join(t.TempDir(), "image.tar")
	run(t, root, "podman", "save", "--format", "docker-archive", "-o", archive, imageTag(t))
	cfg, files := readDockerArchive(t, archive)

	if u := cfg.Config.User; u == "" || u == "root" || u == "0" || strings.HasPrefix(u, "0:") {
		t.Errorf("image user %q: the image must not run as root", u)
	}
	if _, ok := cfg.Config.Volumes["/data"]; !ok {
		t.Errorf("volumes %v: /data (the data directory) must be a volume", cfg.Config.Volumes)
	}
	if got := strings.Join(cfg.Config.Entrypoint, " "); got != "/reconciler" {
		t.Errorf("entrypoint %q, want /reconciler", got)
	}
	for _, p := range []string{"8181/tcp", "8300/tcp"} {
		if _, ok := cfg.Config.ExposedPorts[p]; !ok {
			t.Errorf("exposed ports %v: missing %s", cfg.Config.ExposedPorts, p)
		}
	}
	if len(cfg.RootFS.DiffIDs) != len(files) {
		t.Errorf("%d layers in the config, %d read", len(cfg.RootFS.DiffIDs), len(files))
	}
	checkLayers(t, files)
	exe := filepath.Join(t.TempDir(), "reconciler")
	if err := os.WriteFile(exe, files["reconciler"], 0o755); err != nil {
		t.Fatal(err)
	}
	checkStatic(t, exe)
	out := run(t, root, exe, "version")
	if !strings.Contains(out, "version: ") {
		t.Errorf("reconciler version from the image printed %q", out)
	}
	out = run(t, root, exe, "validate", filepath.Join(root, "policies.example"))
	if !strings.Contains(out, "passed") {
		t.Errorf("reconciler validate from the image printed %q", out)
	}
	serveLikeTheImage(t, exe)
}

// checkLayers wants exactly the binary and the CA bundle in the image:
// FROM scratch, nothing else that could need patching.
func checkLayers(t *testing.T, files map[string][]byte) {
	t.Helper()
	for _, want := range []string{"reconciler", "etc/ssl/certs/ca-certificates.crt"} {
		if len(files[want]) == 0 {
			t.Errorf("the image holds no %s", want)
		}
	}
	for name := range files {
		switch name {
		case "reconciler", "etc/ssl/certs/ca-certificates.crt":
		default:
			t.Errorf("unexpected file %s in the image (FROM scratch: the binary and CA bundle only)", name)
		}
	}
	if !strings.Contains(string(files["etc/ssl/certs/ca-certificates.crt"]), "BEGIN CERTIFICATE") {
		t.Error("the image's CA bundle holds no certificate")
	}
}

// checkStatic fails when the binary asks for a dynamic loader: FROM
// scratch has none.
func checkStatic(t *testing.T, path string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s is dynamically linked: it cannot run FROM scratch (build with CGO_ENABLED=0)", path)
		}
	}
}

// readDockerArchive reads `podman save --format docker-archive`: the
// manifest, the image config, and every regular file of every layer (by
// path, later layers winning).
func readDockerArchive(t *testing.T, path string) (imageConfig, map[string][]byte) {
	t.Helper()
	entries := readTar(t, mustOpen(t, path))
	var manifest []struct {
		Config string
		Layers []string
	}
	if err := json.Unmarshal(entries["manifest.json"], &manifest); err != nil || len(manifest) != 1 {
		t.Fatalf("manifest.json: %v (%d images)", err, len(manifest))
	}
	var cfg imageConfig
	if err := json.Unmarshal(entries[manifest[0].Config], &cfg); err != nil {
		t.Fatalf("image config %s: %v", manifest[0].Config, err)
	}
	files := map[string][]byte{}
	for _, l := range manifest[0].Layers {
		var r io.Reader = bytes.NewReader(entries[l])
		if gz, err := gzip.NewReader(bytes.NewReader(entries[l])); err == nil {
			r = gz
		}
		for name, b := range readTar(t, r) {
			files[strings.TrimPrefix(name, "./")] = b
		}
	}
	return cfg, files
}

// readTar returns the regular files of a tar stream.
func readTar(t *testing.T, r io.Reader) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("read tar: %v", err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = b
	}
}

func mustOpen(t *testing.T, path string) io.Reader {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// run runs a command in dir and returns its standard output; a failure
// fails the test with everything it printed.
func run(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// imageTag is unique per test process, so parallel runs do not share it.
func imageTag(t *testing.T) string {
	return fmt.Sprintf("localhost/reconciler-test:%d", os.Getpid())
}

// goBin is the go command running this test, for make to build with.
func goBin(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	return p
}
