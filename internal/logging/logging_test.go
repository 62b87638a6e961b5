package logging

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/policyrollout/reconciler/internal/config"
	"github.com/policyrollout/reconciler/internal/logging/testlog"
)

func TestJSONAndNamed(t *testing.T) {
	var buf bytes.Buffer
	root := New(config.Log{Level: "info", Format: "json"}, &buf)
	root.Named(API).Info("listening", "addr", "127.0.0.1:1")
	root.Named(API).Debug("hidden")
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("not one JSON line: %q: %v", buf.String(), err)
	}
	if line["@module"] != "reconciler.api" || line["addr"] != "127.0.0.1:1" || line["@message"] != "listening" {
		t.Errorf("line = %v", line)
	}
}

func TestTextLevel(t *testing.T) {
	var buf bytes.Buffer
	root := New(config.Log{Level: "WARN", Format: "text"}, &buf)
	root.Named(Git).Info("quiet")
	root.Named(Git).Warn("loud", "k", 1)
	if out := buf.String(); strings.Contains(out, "quiet") || !strings.Contains(out, "[WARN]  reconciler.git: loud: k=1") {
		t.Errorf("output = %q", out)
	}
}

func TestTestLogger(t *testing.T) {
	log := testlog.New(t)
	log.Named(Node).Info("through t.Log", "k", "v")
}
