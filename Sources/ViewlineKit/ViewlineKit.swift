// ViewlineKit: write view-models, list them, serve them over the line protocol.
// The wire codec and the input framing come along: apps build replies and alerts
// from the codec's types.
@_exported import ViewlineFraming
@_exported import ViewlineProtocol
