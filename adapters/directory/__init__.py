"""User directories behind the domain's ``Directory`` port (``domain.directory``):
``passwdfile`` (a passwd-file in Dovecot's format, the embedded default) and ``ldap`` (an LDAP
server read with ldap3). ``adapters.bootstrap.directories.directory`` picks one from the settings.

May import: ``domain`` and the standard library; ``ldap`` imports ldap3 (the ``directory``
extra) when it connects. Never ``streaming``, ``cli`` or ``devtools``.
"""
