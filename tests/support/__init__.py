"""What several test folders share, kept out of the test modules themselves.

Why a package of its own: a test module that imports another test module
drags that module's tests and fixtures into every importer's collection and
couples unrelated rules (``tests/test_test_layout.py`` forbids it). What two
folders need — a live relay process, a CLI runner, connected machines — is
written once here and used by thin fixtures in the ``conftest.py`` files.
"""
