package deploy_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/policyrollout/reconciler/internal/config"
	"github.com/policyrollout/reconciler/internal/node"
	"github.com/policyrollout/reconciler/internal/tlsconfig"
	"github.com/policyrollout/reconciler/test/harness"
)

// The parts of Kubernetes objects the manifests set and the test reads.
type (
	object struct {
		Kind     string
		Metadata struct{ Name string }
		Data     map[string]string // ConfigMap
		Spec     spec
	}
	spec struct {
		// StatefulSet
		ServiceName         string `yaml:"serviceName"`
		Replicas            int
		PodManagementPolicy string `yaml:"podManagementPolicy"`
		// Selector is a StatefulSet's or PDB's {matchLabels: ...}, or a
		// Service's labels themselves.
		Selector map[string]any
		Template struct {
			Metadata struct{ Labels map[string]string }
			Spec     podSpec
		}
		VolumeClaimTemplates []struct{ Metadata struct{ Name string } } `yaml:"volumeClaimTemplates"`
		// Service
		ClusterIP                string `yaml:"clusterIP"`
		PublishNotReadyAddresses bool   `yaml:"publishNotReadyAddresses"`
		Ports                    []struct {
			Name       string
			Port       int
			TargetPort string `yaml:"targetPort"`
		}
		// PodDisruptionBudget
		MaxUnavailable *int `yaml:"maxUnavailable"`
		MinAvailable   *int `yaml:"minAvailable"`
	}
	podSpec struct {
		TerminationGracePeriodSeconds int `yaml:"terminationGracePeriodSeconds"`
		SecurityContext               struct {
			RunAsNonRoot bool `yaml:"runAsNonRoot"`
			RunAsUser    int  `yaml:"runAsUser"`
			RunAsGroup   int  `yaml:"runAsGroup"`
			FSGroup      int  `yaml:"fsGroup"`
		} `yaml:"securityContext"`
		Containers []container
		Volumes    []struct {
			Name      string
			ConfigMap *struct{ Name string } `yaml:"configMap"`
			Secret    *struct {
				SecretName string `yaml:"secretName"`
			}
		}
	}
	container struct {
		Name, Image string
		Args        []string
		Env         []struct {
			Name      string
			ValueFrom struct {
				SecretKeyRef *struct{ Name, Key string } `yaml:"secretKeyRef"`
				FieldRef     *struct {
					FieldPath string `yaml:"fieldPath"`
				} `yaml:"fieldRef"`
			} `yaml:"valueFrom"`
		}
		Ports []struct {
			Name          string
			ContainerPort int `yaml:"containerPort"`
		}
		ReadinessProbe  probe `yaml:"readinessProbe"`
		LivenessProbe   probe `yaml:"livenessProbe"`
		SecurityContext struct {
			AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
			ReadOnlyRootFilesystem   bool  `yaml:"readOnlyRootFilesystem"`
		} `yaml:"securityContext"`
		VolumeMounts []struct {
			Name      string
			MountPath string `yaml:"mountPath"`
		} `yaml:"volumeMounts"`
	}
	probe struct {
		HTTPGet struct{ Path, Port, Scheme string } `yaml:"httpGet"`
	}
)

// readManifests decodes every document of deploy/kubernetes/*.yaml, by
// kind and name.
func readManifests(t *testing.T) map[string]object {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(harness.ModuleRoot(), "deploy/kubernetes/*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	out := map[string]object{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(b))
		for {
			var o object
			if err := dec.Decode(&o); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if o.Kind == "Kustomization" {
				continue
			}
			out[o.Kind+"/"+o.Metadata.Name] = o
		}
	}
	return out
}

func get(t *testing.T, objs map[string]object, key string) object {
	t.Helper()
	o, ok := objs[key]
	if !ok {
		t.Fatalf("no %s in deploy/kubernetes", key)
	}
	return o
}

// TestKubernetesManifests checks the StatefulSet, its Services, its
// PodDisruptionBudget and the config of every pod against each other, the
// image and the config loader: a manifest that would not start a cluster
// (a key the loader refuses, a probe on the wrong port, a grace period
// shorter than the drain) fails here, without a cluster.
func TestKubernetesManifests(t *testing.T) {
	t.Parallel()
	objs := readManifests(t)
	sts := get(t, objs, "StatefulSet/reconciler")
	pod := sts.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(pod.Containers))
	}
	ctr := pod.Containers[0]
	if sts.Spec.Replicas != 3 {
		t.Errorf("replicas %d, want 3 voters", sts.Spec.Replicas)
	}
	checkServices(t, objs, sts)
	checkPDB(t, get(t, objs, "PodDisruptionBudget/reconciler"), sts)
	checkPodSecurity(t, pod, ctr)
	checkGracePeriod(t, "terminationGracePeriodSeconds", pod.TerminationGracePeriodSeconds)

	ports := map[string]int{}
	for _, p := range ctr.Ports {
		ports[p.Name] = p.ContainerPort
	}
	mounts := map[string]string{}
	for _, m := range ctr.VolumeMounts {
		mounts[m.Name] = m.MountPath
	}
	env := map[string]bool{}
	for _, e := range ctr.Env {
		if e.ValueFrom.SecretKeyRef != nil {
			env[e.Name] = true
		}
	}
	cm := get(t, objs, "ConfigMap/reconciler-config")
	var cfgVolume, tlsSecret string
	for _, v := range pod.Volumes {
		if v.ConfigMap != nil && v.ConfigMap.Name == cm.Metadata.Name {
			cfgVolume = v.Name
		}
		if v.Secret != nil {
			tlsSecret = v.Name
		}
	}
	if cfgVolume == "" || tlsSecret == "" {
		t.Fatalf("the pod mounts no ConfigMap %s or no TLS Secret", cm.Metadata.Name)
	}
	wantArgs := []string{"serve", "--config", path.Join(mounts[cfgVolume], "$(POD_NAME).toml")}
	if strings.Join(ctr.Args, " ") != strings.Join(wantArgs, " ") {
		t.Errorf("args %q, want %q", ctr.Args, wantArgs)
	}
	if len(cm.Data) != sts.Spec.Replicas {
		t.Errorf("the ConfigMap holds %d files for %d replicas", len(cm.Data), sts.Spec.Replicas)
	}
	bootstraps := 0
	for i := 0; i < sts.Spec.Replicas; i++ {
		id := fmt.Sprintf("%s-%d", sts.Metadata.Name, i)
		c := podConfig(t, cm, id, mounts[cfgVolume])
		if c.Node.Bootstrap {
			bootstraps++
		}
		checkPodConfig(t, id, c, sts, ports, mounts, tlsSecret, env)
		scheme := "HTTP"
		if c.API.TLSCertFile != "" {
			scheme = "HTTPS"
		}
		for name, p := range map[string]probe{"readiness": ctr.ReadinessProbe, "liveness": ctr.LivenessProbe} {
			if p.HTTPGet.Scheme != scheme || portOf(t, c.Node.HTTPAddr) != ports[p.HTTPGet.Port] {
				t.Errorf("%s probe %+v: the API of %s is %s on port %d", name, p.HTTPGet, id, scheme, portOf(t, c.Node.HTTPAddr))
			}
		}
	}
	if bootstraps != 1 {
		t.Errorf("%d pods bootstrap; exactly one must (the others join it)", bootstraps)
	}
	if ctr.ReadinessProbe.HTTPGet.Path != "/readyz" || ctr.LivenessProbe.HTTPGet.Path != "/healthz" {
		t.Errorf("probes %q and %q, want /readyz (readiness) and /healthz (liveness)",
			ctr.ReadinessProbe.HTTPGet.Path, ctr.LivenessProbe.HTTPGet.Path)
	}
}

// podConfig loads pod id's file of the ConfigMap with the real loader.
func podConfig(t *testing.T, cm object, id, dir string) *config.Config {
	t.Helper()
	data, ok := cm.Data[id+".toml"]
	if !ok {
		t.Fatalf("the ConfigMap has no %s.toml", id)
	}
	c, err := config.Parse([]byte(data), dir)
	if err != nil {
		t.Fatalf("%s.toml: %v", id, err)
	}
	return c
}

func checkPodConfig(t *testing.T, id string, c *config.Config, sts object, ports map[string]int,
	mounts map[string]string, tlsVolume string, env map[string]bool) {
	t.Helper()
	if c.Node.ID != id {
		t.Errorf("%s.toml: node.id %q, want the pod name", id, c.Node.ID)
	}
	if c.Node.DataDir != mounts["data"] || len(sts.Spec.VolumeClaimTemplates) != 1 ||
		sts.Spec.VolumeClaimTemplates[0].Metadata.Name != "data" {
		t.Errorf("%s.toml: node.data_dir %q is not the mount of the pod's volume claim (%q)", id, c.Node.DataDir, mounts["data"])
	}
	if c.Node.DataDir != "/data" {
		t.Errorf("%s.toml: node.data_dir %q is not the image's volume /data", id, c.Node.DataDir)
	}
	host := id + "." + sts.Spec.ServiceName
	for _, a := range []struct{ key, bind, adv, port string }{
		{"http", c.Node.HTTPAddr, c.Node.HTTPAdvertiseAddr, "http"},
		{"raft", c.Node.RaftAddr, c.Node.RaftAdvertiseAddr, "raft"},
	} {
		if want := net.JoinHostPort(host, fmt.Sprint(ports[a.port])); a.adv != want {
			t.Errorf("%s.toml: node.%s_advertise_addr %q, want %q (the pod's stable name)", id, a.key, a.adv, want)
		}
		if portOf(t, a.bind) != ports[a.port] {
			t.Errorf("%s.toml: node.%s_addr %q is not on the container port %s (%d)", id, a.key, a.bind, a.port, ports[a.port])
		}
	}
	for _, j := range c.Node.Join {
		h, p, _ := net.SplitHostPort(j)
		if !strings.HasPrefix(h, sts.Metadata.Name+"-") || !strings.HasSuffix(h, "."+sts.Spec.ServiceName) ||
			p != fmt.Sprint(ports["raft"]) || h == host {
			t.Errorf("%s.toml: join %q is not another pod's raft address", id, j)
		}
	}
	if !c.Node.Bootstrap && len(c.Node.Join) == 0 {
		t.Errorf("%s.toml: neither bootstraps nor joins", id)
	}
	if !c.TLS.Enabled() {
		t.Errorf("%s.toml: no [tls]: a node beyond loopback refuses to start without it", id)
	}
	want := tlsconfig.DirFiles(mounts[tlsVolume], id) // the names `reconciler certs` writes
	if c.TLS.CAFile != want.CA || c.TLS.CertFile != want.Cert || c.TLS.KeyFile != want.Key {
		t.Errorf("%s.toml: [tls] %+v, want the files of `reconciler certs` in the Secret: %+v", id, c.TLS, want)
	}
	for _, f := range []string{c.API.TLSCertFile, c.API.TLSKeyFile} {
		if f != "" && filepath.Dir(f) != mounts[tlsVolume] {
			t.Errorf("%s.toml: [api] file %s is not in the TLS Secret's mount", id, f)
		}
	}
	for key, v := range map[string]string{"api.token_env": c.API.TokenEnv, "git.token_env": c.Git.TokenEnv} {
		if v == "" || !env[v] {
			t.Errorf("%s.toml: %s %q is not set from a Secret in the pod", id, key, v)
		}
	}
	if c.API.TokenEnv == "" && len(c.API.Tokens) == 0 {
		t.Errorf("%s.toml: no API token: a node beyond loopback refuses to start without one", id)
	}
}

func checkServices(t *testing.T, objs map[string]object, sts object) {
	t.Helper()
	podLabels := sts.Spec.Template.Metadata.Labels
	if !selects(matchLabels(sts.Spec.Selector), podLabels) {
		t.Errorf("the StatefulSet's selector does not select its pods")
	}
	headless := get(t, objs, "Service/"+sts.Spec.ServiceName)
	if headless.Spec.ClusterIP != "None" || !headless.Spec.PublishNotReadyAddresses {
		t.Errorf("Service %s must be headless and publish pods that are not ready (peers join and catch up before /readyz)", sts.Spec.ServiceName)
	}
	ctrPorts := map[string]bool{}
	for _, p := range sts.Spec.Template.Spec.Containers[0].Ports {
		ctrPorts[p.Name] = true
	}
	for key, o := range objs {
		if o.Kind != "Service" {
			continue
		}
		if !selects(stringMap(o.Spec.Selector), podLabels) {
			t.Errorf("%s does not select the StatefulSet's pods", key)
		}
		for _, p := range o.Spec.Ports {
			if !ctrPorts[p.TargetPort] {
				t.Errorf("%s: port %s targets %q, no port of the container", key, p.Name, p.TargetPort)
			}
		}
	}
}

// checkPDB wants voluntary disruptions to keep a raft quorum.
func checkPDB(t *testing.T, pdb, sts object) {
	t.Helper()
	if !selects(matchLabels(pdb.Spec.Selector), sts.Spec.Template.Metadata.Labels) {
		t.Error("the PodDisruptionBudget does not select the StatefulSet's pods")
	}
	quorum := sts.Spec.Replicas/2 + 1
	switch {
	case pdb.Spec.MaxUnavailable != nil:
		if sts.Spec.Replicas-*pdb.Spec.MaxUnavailable < quorum {
			t.Errorf("maxUnavailable %d of %d leaves no quorum of %d", *pdb.Spec.MaxUnavailable, sts.Spec.Replicas, quorum)
		}
	case pdb.Spec.MinAvailable != nil:
		if *pdb.Spec.MinAvailable < quorum {
			t.Errorf("minAvailable %d is below the quorum of %d", *pdb.Spec.MinAvailable, quorum)
		}
	default:
		t.Error("the PodDisruptionBudget sets neither maxUnavailable nor minAvailable")
	}
}

// checkPodSecurity wants the image's non-root user, and a container that
// cannot gain privileges or write outside its volume.
func checkPodSecurity(t *testing.T, pod podSpec, ctr container) {
	t.Helper()
	uid, gid := containerfileUser(t)
	sc := pod.SecurityContext
	if !sc.RunAsNonRoot || sc.RunAsUser != uid || sc.RunAsGroup != gid || sc.FSGroup != gid {
		t.Errorf("pod securityContext %+v: want runAsNonRoot and the image's user %d:%d (fsGroup too, so the volume is writable)", sc, uid, gid)
	}
	if p := ctr.SecurityContext.AllowPrivilegeEscalation; p == nil || *p || !ctr.SecurityContext.ReadOnlyRootFilesystem {
		t.Error("the container must set allowPrivilegeEscalation: false and readOnlyRootFilesystem: true")
	}
}

// checkGracePeriod wants a stop deadline that covers the node's drain:
// Close shuts the ext_authz gRPC server down, then the HTTP servers, each
// within node.DefaultShutdownTimeout, then closes raft; and not so much
// longer that a hung node holds a rollout up for minutes.
func checkGracePeriod(t *testing.T, what string, seconds int) {
	t.Helper()
	drain := int((2 * node.DefaultShutdownTimeout).Seconds())
	if seconds < drain+5 || seconds > drain+60 {
		t.Errorf("%s %d s: the drain takes up to %d s (two shutdowns of %v) plus raft's close; want %d-%d s",
			what, seconds, drain, node.DefaultShutdownTimeout, drain+5, drain+60)
	}
}

// containerfileUser reads the USER uid:gid of deploy/Containerfile.
func containerfileUser(t *testing.T) (int, int) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(harness.ModuleRoot(), "deploy/Containerfile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if u, ok := strings.CutPrefix(line, "USER "); ok {
			var uid, gid int
			if _, err := fmt.Sscanf(strings.TrimSpace(u), "%d:%d", &uid, &gid); err != nil {
				t.Fatalf("Containerfile USER %q: want numeric uid:gid (scratch has no user database)", u)
			}
			return uid, gid
		}
	}
	t.Fatal("Containerfile sets no USER")
	return 0, 0
}

func portOf(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	var n int
	fmt.Sscan(p, &n)
	return n
}

func matchLabels(sel map[string]any) map[string]string {
	m, _ := sel["matchLabels"].(map[string]any)
	return stringMap(m)
}

func stringMap(m map[string]any) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out
}

// selects reports whether a non-empty selector matches labels.
func selects(sel, labels map[string]string) bool {
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return len(sel) > 0
}
