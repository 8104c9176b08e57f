/// The fixed parts of a successful reply's line, as constants of the binary: read
/// with no lazy initialization and no reference count, by the server's writer of
/// replies and by ``ServerMessage``'s public arrays alike. Inlinable, so that the
/// writer in another module reads each part as a literal of its own, with no call.
package enum ReplyParts {
    /// How every reply's line begins, up to its `re`: `{"type":"reply","re":`.
    /// (Computed: a literal, not a global made on first use.)
    @inlinable package static var head: StaticString { #"{"type":"reply","re":"# }
    /// Between a successful reply's `re` and its result: `,"ok":true,"result":`.
    @inlinable package static var successfulMiddle: StaticString { #","ok":true,"result":"# }
    /// How a reply's line ends: `}` and the newline.
    @inlinable package static var tail: StaticString { "}\n" }
    /// A successful reply's start up to its result when `re` is `null` (an inline
    /// command has no id of its own): ``head``, `null` and ``successfulMiddle``.
    @inlinable package static var nullHead: StaticString { #"{"type":"reply","re":null,"ok":true,"result":"# }

    /// A part's bytes, in place.
    @inlinable @inline(__always)
    package static func bytes(_ part: StaticString) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: part.utf8Start, count: part.utf8CodeUnitCount)
    }
}
