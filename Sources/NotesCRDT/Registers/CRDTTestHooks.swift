/// Switches that deliberately break the CRDT, for tests that prove a checker catches the breakage.
///
/// Task-local rather than global, so a test that turns one on (with `$lwwIgnoresReplicaOnTies
/// .withValue(true) { ... }`) breaks only the work done inside that scope, never a test running in
/// parallel. Off by default; production code never sets them.
public enum CRDTTestHooks {
    /// When true, `LWWRegister` breaks a timestamp tie by sequence number alone, ignoring the
    /// replica: two replicas that write one field in the same millisecond may then disagree.
    @TaskLocal public static var lwwIgnoresReplicaOnTies = false
}
