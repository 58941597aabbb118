#![no_main]
//! Quorum SASL's inputs from peers and files: a QuorumAuthPacket decodes without panicking and
//! re-encodes to the bytes it took; DIGEST-MD5 challenges and responses and JAAS text are
//! errors, never panics.
use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use zkfle::sasl::{DigestClient, DigestServer, JaasConfig};
use zkfle::wire::quorum_auth::QuorumAuthPacket;

fuzz_target!(|data: &[u8]| {
    if let Ok(Some((p, used))) = QuorumAuthPacket::decode(data) {
        // A null token (-1) reads as empty and re-encodes as length 0.
        if data[12..16] != [0xff; 4] {
            assert_eq!(p.encode(), data[..used]);
        }
    }
    let mut client = DigestClient::new("zk", "pw", "cnonce");
    if let Ok(response) = client.respond(data) {
        let _ = client.verify_rspauth(&response);
    }
    let users = BTreeMap::from([("zk".to_string(), "pw".to_string())]);
    let _ = DigestServer::new("nonce").check(data, &users);
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = JaasConfig::parse(text);
    }
});
