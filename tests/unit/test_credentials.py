"""The credential format: recognisable, 256 bits of randomness, checksummed, stored as digests."""

import hashlib

import pytest

from service.domain import credentials
from service.domain.credentials import API_KEY_KIND, SESSION_KIND


def test_api_keys_carry_the_prefix_and_a_fixed_length() -> None:
    key = credentials.generate_api_key()
    assert key.startswith("fhk_")
    assert len(key) == credentials.SECRET_LENGTH == 53


def test_generated_credentials_are_well_formed_and_unique() -> None:
    keys = {credentials.generate_api_key() for _ in range(200)}
    assert len(keys) == 200
    assert all(credentials.is_well_formed(key, API_KEY_KIND) for key in keys)
    token = credentials.generate_session_token()
    assert token.startswith("fhs_") and credentials.is_well_formed(token, SESSION_KIND)


def test_random_part_spans_256_bits() -> None:
    # 43 base62 characters hold 32 random bytes; the leading character varies over the alphabet.
    bodies = [credentials.generate_api_key()[4:47] for _ in range(300)]
    assert all(len(body) == 43 for body in bodies)
    assert 62**43 >= 2**256
    assert len({body[-1] for body in bodies}) > 40


def test_a_single_changed_character_breaks_the_checksum() -> None:
    key = credentials.generate_api_key()
    for position in range(4, len(key)):
        replacement = "A" if key[position] != "A" else "B"
        typo = key[:position] + replacement + key[position + 1 :]
        assert not credentials.is_well_formed(typo, API_KEY_KIND), position


@pytest.mark.parametrize(
    "mangle",
    [
        lambda k: k[:-1],  # truncated
        lambda k: k + "A",  # too long
        lambda k: "xxx_" + k[4:],  # wrong prefix
        lambda k: k[:10] + "-" + k[11:],  # outside the alphabet
        lambda k: k[:10] + "é" + k[11:],  # non-ASCII
        lambda k: "",
    ],
)
def test_malformed_keys_are_refused_without_a_lookup(mangle) -> None:  # type: ignore[no-untyped-def]
    assert not credentials.is_well_formed(mangle(credentials.generate_api_key()), API_KEY_KIND)


def test_a_session_token_is_not_an_api_key_and_back() -> None:
    assert not credentials.is_well_formed(credentials.generate_session_token(), API_KEY_KIND)
    assert not credentials.is_well_formed(credentials.generate_api_key(), SESSION_KIND)


def test_digest_is_sha256_hex_and_never_the_secret() -> None:
    key = credentials.generate_api_key()
    assert credentials.digest(key) == hashlib.sha256(key.encode()).hexdigest()
    assert key not in credentials.digest(key)


def test_display_prefix_tells_keys_apart_without_revealing_them() -> None:
    key = credentials.generate_api_key()
    prefix = credentials.display_prefix(key)
    assert prefix == key[:12] + "..."
    assert not credentials.is_well_formed(prefix, API_KEY_KIND)


def test_ids_have_a_checked_shape() -> None:
    key_id = credentials.new_id("key")
    assert credentials.is_valid_id(key_id, "key")
    assert not credentials.is_valid_id(key_id, "usr")
    assert not credentials.is_valid_id(key_id[:-1], "key")
    assert not credentials.is_valid_id(key_id[:-1] + "/", "key")
