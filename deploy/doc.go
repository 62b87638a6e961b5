// Package deploy holds no code: its directory holds what runs a reconciler
// cluster in production (the container image's Containerfile, Kubernetes
// manifests, a systemd unit, Prometheus alert rules and a Grafana
// dashboard), and its tests check each against the code it configures:
// the image is built and inspected, every TOML is read by the real config
// loader, every alert and panel names only metrics a running node exports.
// docs/deploy.md is the guide.
package deploy
