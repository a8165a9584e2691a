"""What the tests share: real servers on loopback, clocks the tests move, ways to run the
command, configs that point at the servers, and builders of the data several tests use.

Test modules import from here (`from support.servers import feed_server`), never from each
other; fixtures that several test files use are in tests/conftest.py.
"""
