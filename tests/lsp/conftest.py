"""Fixtures of the LSP end-to-end tests (helpers live in lsp_workspace.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_lsp
from lsp_workspace import PROFILES, SERVER, Workspace, build_workspace, start_session
from pytest_lsp import LanguageClient


@pytest.fixture(scope="session")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    return build_workspace(tmp_path_factory.mktemp("lsp-ws"))


@pytest_lsp.fixture(scope="session", params=PROFILES, config=SERVER)
async def client(
    lsp_client: LanguageClient, request: pytest.FixtureRequest, workspace: Workspace
) -> AsyncIterator[None]:
    await start_session(lsp_client, request.param, workspace, ["proj", "lib", "empty", "broken"])
    lsp_client.profile = request.param  # type: ignore[attr-defined]
    yield
    await lsp_client.shutdown_session()
