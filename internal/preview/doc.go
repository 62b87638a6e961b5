// Package preview implements AIP-236 policy preview: experiments (the
// PolicyExperiment resource and its state machine), shadow evaluation of
// ACTIVE experiments beside the live decision on live traffic, their
// statistics, the preview log, a recorder of recent traffic for instant
// replays, offline replay of recorded traffic, and the summaries shown on
// pull requests.
//
// The state machine (Create, Update, StartPreview, StopPreview, Commit,
// Delete, CascadeDelete, List) is pure: times come in as arguments, so the
// leader decides a change before proposing it to raft and any node or test
// can replay it. Shadow is the per-node runtime: Offer never blocks a live
// decision. See DESIGN.md beside this file and docs/preview.md.
package preview
