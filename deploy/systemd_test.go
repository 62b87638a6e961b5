package deploy_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/config"
	"github.com/policyrollout/reconciler/test/harness"
)

// unit is a parsed systemd unit file: section → key → values (a key may
// repeat).
type unit map[string]map[string][]string

func (u unit) get(section, key string) string {
	v := u[section][key]
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

func readUnit(t *testing.T, path string) unit {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	u := unit{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
			u[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s: not a unit line: %q", path, line)
			}
			u[section][k] = append(u[section][k], v)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return u
}

// TestSystemdUnit checks deploy/systemd: systemd itself verifies the unit
// (with the real binary at ExecStart's place) and rates its sandboxing;
// the config it starts the node with loads with the real loader, and its
// data directory is the one place the unit lets the node write.
func TestSystemdUnit(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(harness.ModuleRoot(), "deploy/systemd")
	u := readUnit(t, filepath.Join(dir, "reconciler.service"))
	args := strings.Fields(u.get("Service", "ExecStart"))
	if len(args) != 4 || args[1] != "serve" || args[2] != "--config" {
		t.Fatalf("ExecStart %q, want BINARY serve --config FILE", u.get("Service", "ExecStart"))
	}
	verifyWithSystemd(t, dir, args[0])

	data, err := os.ReadFile(filepath.Join(dir, filepath.Base(args[3])))
	if err != nil {
		t.Fatalf("deploy/systemd has no %s for ExecStart's --config: %v", filepath.Base(args[3]), err)
	}
	c, err := config.Parse(data, filepath.Dir(args[3]))
	if err != nil {
		t.Fatalf("deploy/systemd/config.toml: %v", err)
	}
	state := "/var/lib/" + u.get("Service", "StateDirectory")
	if c.Node.DataDir != state || u.get("Service", "WorkingDirectory") != state {
		t.Errorf("node.data_dir %q and WorkingDirectory %q must be the StateDirectory %s, the only place ProtectSystem=strict lets the node write",
			c.Node.DataDir, u.get("Service", "WorkingDirectory"), state)
	}
	for _, f := range []string{c.TLS.CAFile, c.TLS.CertFile, c.TLS.KeyFile, c.API.TLSCertFile, c.API.TLSKeyFile} {
		if !strings.HasPrefix(f, filepath.Dir(args[3])+"/") {
			t.Errorf("%s is not under the config's directory %s", f, filepath.Dir(args[3]))
		}
	}
	if !c.TLS.Enabled() || (c.API.TokenEnv == "" && len(c.API.Tokens) == 0) {
		t.Error("config.toml: a node beyond loopback needs [tls] and an API token")
	}
	if u.get("Service", "EnvironmentFile") == "" {
		t.Errorf("no EnvironmentFile: where do %s and %s come from?", c.API.TokenEnv, c.Git.TokenEnv)
	}
	if user := u.get("Service", "User"); user == "" || user == "root" || user == "0" {
		t.Errorf("User=%q: the node must not run as root", user)
	}
	for key, want := range map[string]string{
		"NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes",
		"PrivateDevices": "yes", "CapabilityBoundingSet": "", "RestrictNamespaces": "yes",
		"MemoryDenyWriteExecute": "yes", "KillSignal": "SIGTERM",
	} {
		if v, ok := u["Service"][key]; !ok || v[len(v)-1] != want {
			t.Errorf("[Service] %s=%q, want %q", key, u.get("Service", key), want)
		}
	}
	stop, err := strconv.Atoi(strings.TrimSuffix(u.get("Service", "TimeoutStopSec"), "s"))
	if err != nil {
		t.Fatalf("TimeoutStopSec=%q: want seconds", u.get("Service", "TimeoutStopSec"))
	}
	checkGracePeriod(t, "TimeoutStopSec", stop)
}

// verifyWithSystemd runs systemd-analyze verify on a copy of the unit
// whose ExecStart names the binary the tests built (verify wants it to
// exist), then systemd-analyze security, whose exposure must be at most
// 2.0 of 10 ("OK"). Any complaint of verify (an unknown key) fails.
func verifyWithSystemd(t *testing.T, dir, exec0 string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "reconciler.service"))
	if err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(t.TempDir(), "reconciler.service")
	text := strings.ReplaceAll(string(b), "ExecStart="+exec0+" ", "ExecStart="+harness.Binary(t)+" ")
	if err := os.WriteFile(copyPath, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("systemd-analyze", "verify", copyPath).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	out, err = exec.Command("systemd-analyze", "security", "--offline=true", "--threshold=20", copyPath).CombinedOutput()
	if err != nil {
		t.Errorf("systemd-analyze security: exposure above 2.0 (%v):\n%s", err, lastLines(string(out), 3))
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
