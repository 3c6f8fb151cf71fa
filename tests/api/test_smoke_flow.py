"""The whole story of the README, as one test: log in, create a key, use it, revoke it."""

from tests.support.api import Api, assert_error, bearer


async def test_login_create_key_list_files_revoke_and_refused(api: Api) -> None:
    token = await api.user_with_session()
    created = await api.create_key(token, permissions=["files.read"])

    response = await api.files(key=created["secret_key"])
    assert response.status == 200
    assert await response.json() == {"success": True, "data": {"files": [], "next_cursor": None}}

    response = await api.client.delete(f"/api/v1/keys/{created['id']}", headers=bearer(token))
    assert response.status == 200

    await assert_error(await api.files(key=created["secret_key"]), 401, "api_key_revoked")
