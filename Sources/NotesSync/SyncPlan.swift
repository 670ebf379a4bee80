import NotesCRDT

/// The sync protocol as a state machine with no I/O, in the style of swift-nio's protocol state
/// machines: each event returns the action to take; transports only move bytes.
///
/// One round: we learn what the peer has (`peerVersionKnown`), send what it lacks, then receive
/// bundles (`received`), which are applied by the caller in one transaction.
public struct SyncStateMachine: Sendable {
    public enum State: Sendable, Equatable {
        case idle
        case awaitingPeerVersion
        case awaitingBundles
        case done
    }

    public enum Action: Sendable, Equatable {
        /// Ask the transport what the peer has.
        case fetchPeerVersion
        /// Send these operation ranges (those the peer lacks); empty means nothing to send.
        case send([OpIDRange])
        /// Apply these bundles' changes, and record each sender's version vector.
        case apply(changes: Int, from: [ReplicaID])
        /// Nothing more to do.
        case finish
    }

    public private(set) var state: State = .idle
    public let localVersion: VersionVector

    public init(localVersion: VersionVector) { self.localVersion = localVersion }

    public mutating func start() -> Action {
        precondition(state == .idle)
        state = .awaitingPeerVersion
        return .fetchPeerVersion
    }

    /// The peer's version vector arrived: send exactly what it lacks.
    public mutating func peerVersionKnown(_ peer: VersionVector) -> Action {
        precondition(state == .awaitingPeerVersion)
        state = .awaitingBundles
        return .send(peer.missing(from: localVersion))
    }

    /// Bundles arrived (possibly none).
    public mutating func received(_ bundles: [SyncBundle]) -> Action {
        precondition(state == .awaitingBundles)
        state = .done
        let useful = bundles.filter { !$0.changes.isEmpty }
        if useful.isEmpty { return .finish }
        return .apply(changes: useful.reduce(0) { $0 + $1.changes.count }, from: bundles.map(\.sender))
    }
}
