//! Hash slots exactly as Redis Cluster: CRC16 (XMODEM) of the key, or of the hash tag
//! `{...}` when the key has a non-empty one, modulo 16384.

/// Number of hash slots.
pub const SLOT_COUNT: u16 = 16384;

/// CRC16 (XMODEM: polynomial 0x1021, initial value 0), as Redis' crc16.c, by
/// the `crc` crate's sixteen tables (16 bytes a step: a 16-byte key hashed
/// in one step instead of sixteen; every keyed command of several shards
/// hashes its key to route it). Its 8 KiB of tables are made at compile time.
static CRC16: crc::Crc<u16, crc::Table<16>> =
    crc::Crc::<u16, crc::Table<16>>::new(&crc::CRC_16_XMODEM);

/// CRC16-CCITT (XMODEM): polynomial 0x1021, initial value 0, as Redis' crc16.c.
pub fn crc16(bytes: &[u8]) -> u16 {
    CRC16.checksum(bytes)
}

/// The part of `key` that is hashed: the text between the first `{` and the next `}`
/// when that text is non-empty, else the whole key.
pub fn hash_tag(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{') {
        if let Some(len) = key[open + 1..].iter().position(|&b| b == b'}') {
            if len > 0 {
                return &key[open + 1..open + 1 + len];
            }
        }
    }
    key
}

/// The hash slot of `key`.
pub fn key_slot(key: &[u8]) -> u16 {
    crc16(hash_tag(key)) & (SLOT_COUNT - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_redis_cluster_reference_values() {
        // Values from `CLUSTER KEYSLOT` on Redis 7.
        assert_eq!(crc16(b"123456789"), 0x31C3);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"bar"), 5061);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_eq!(key_slot(b"foo{}{bar}"), key_slot(b"foo{}{bar}"));
        assert_eq!(hash_tag(b"foo{}{bar}"), b"foo{}{bar}");
        assert_eq!(hash_tag(b"foo{{bar}}zap"), b"{bar");
        assert_eq!(hash_tag(b"foo{bar}{zap}"), b"bar");
    }
}
