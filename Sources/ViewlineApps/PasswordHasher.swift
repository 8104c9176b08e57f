import CPasswordHash

/// Salted password hashing with the system's libxcrypt (yescrypt).
enum PasswordHasher {
    static func hash(_ password: String) -> String? {
        var buffer = [CChar](repeating: 0, count: 256)
        let status = buffer.withUnsafeMutableBufferPointer { vl_password_hash(password, $0.baseAddress, $0.count) }
        guard status == 0 else { return nil }
        let bytes = buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
        return String(decoding: bytes, as: UTF8.self)
    }

    static func verify(_ password: String, against hash: String) -> Bool {
        vl_password_verify(password, hash) == 1
    }
}
