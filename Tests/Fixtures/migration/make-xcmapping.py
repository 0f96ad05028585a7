#!/usr/bin/env python3
"""Writes SmallToSmall2.xcmappingmodel/xcmapping.xml: a mapping model in the
format Xcode's mapping editor saves (a Core Data XML store of XDDEV* objects),
for MappingModelFileTests. Value expressions are NSKeyedArchiver archives of
NSExpression objects, as Xcode stores them in `valueexpressiondata`.

Run from this directory: python3 make-xcmapping.py
"""
import base64, plistlib
from plistlib import UID

def archive(objects):
    """objects[0] is the root expression; references are UID(index + 1)."""
    return plistlib.dumps({"$version": 100000, "$archiver": "NSKeyedArchiver",
                           "$top": {"root": UID(1)}, "$objects": ["$null"] + objects},
                          fmt=plistlib.FMT_BINARY)

def cls(name, chain):
    return {"$classname": name, "$classes": chain + ["NSExpression", "NSObject"]}

def source_key(key):
    # $source.<key>: valueForKeyPath: on the variable `source`.
    return archive([
        {"$class": UID(7), "NSExpressionType": 3, "NSOperand": UID(2), "NSSelectorName": UID(4), "NSArguments": UID(5)},
        {"$class": UID(8), "NSExpressionType": 2, "NSVariable": UID(3)},
        "source",
        "valueForKeyPath:",
        {"$class": UID(10), "NS.objects": [UID(6)]},
        {"$class": UID(9), "NSExpressionType": 10, "NSKeyPath": UID(11)},
        cls("NSKeyPathExpression", ["NSKeyPathExpression", "NSFunctionExpression"]),
        cls("NSVariableExpression", ["NSVariableExpression"]),
        cls("NSKeyPathSpecifierExpression", ["NSKeyPathSpecifierExpression"]),
        {"$classname": "NSArray", "$classes": ["NSArray", "NSObject"]},
        key,
    ])

def policy_call(selector, key):
    # FUNCTION($entityPolicy, '<selector>', $source.<key>)
    return archive([
        {"$class": UID(7), "NSExpressionType": 4, "NSOperand": UID(2), "NSSelectorName": UID(4), "NSArguments": UID(5)},
        {"$class": UID(8), "NSExpressionType": 2, "NSVariable": UID(3)},
        "entityPolicy",
        selector,
        {"$class": UID(10), "NS.objects": [UID(6)]},
        {"$class": UID(11), "NSExpressionType": 3, "NSOperand": UID(12), "NSSelectorName": UID(14), "NSArguments": UID(15)},
        cls("NSFunctionExpression", ["NSFunctionExpression"]),
        cls("NSVariableExpression", ["NSVariableExpression"]),
        cls("NSKeyPathSpecifierExpression", ["NSKeyPathSpecifierExpression"]),
        {"$classname": "NSArray", "$classes": ["NSArray", "NSObject"]},
        cls("NSKeyPathExpression", ["NSKeyPathExpression", "NSFunctionExpression"]),
        {"$class": UID(8), "NSExpressionType": 2, "NSVariable": UID(13)},
        "source",
        "valueForKeyPath:",
        {"$class": UID(10), "NS.objects": [UID(16)]},
        {"$class": UID(9), "NSExpressionType": 10, "NSKeyPath": UID(17)},
        key,
    ])

def b64(data):
    text = base64.b64encode(data).decode()
    return "\n".join(text[i:i + 76] for i in range(0, len(text), 76))

objects = [
    ("XDDEVMAPPINGMODEL", "z101", [("sourcemodelpath", "string", "Small/Small.xcdatamodeld/Small.xcdatamodel"),
                                   ("destinationmodelpath", "string", "Small/Small.xcdatamodeld/Small 2.xcdatamodel")],
     [("entitymappings", "0/0", "XDDEVENTITYMAPPING", "z102 z103 z104 z105")]),
    ("XDDEVENTITYMAPPING", "z102", [("sourcename", "string", "Person"), ("destinationname", "string", "Person"),
                                    ("mappingtypename", "string", "Custom"), ("mappingnumber", "int16", "1"),
                                    ("migrationpolicyclassname", "string", "Small.PersonPolicy"),
                                    ("autogenerateexpression", "bool", "1")],
     [("attributemappings", "0/0", "XDDEVATTRIBUTEMAPPING", "z110 z111 z112 z113"),
      ("relationshipmappings", "0/0", "XDDEVRELATIONSHIPMAPPING", "z114 z115")]),
    ("XDDEVENTITYMAPPING", "z103", [("sourcename", "string", "Department"), ("destinationname", "string", "Department"),
                                    ("mappingtypename", "string", "Undefined"), ("mappingnumber", "int16", "2"),
                                    ("autogenerateexpression", "bool", "1")],
     [("attributemappings", "0/0", "XDDEVATTRIBUTEMAPPING", "z116"),
      ("relationshipmappings", "0/0", "XDDEVRELATIONSHIPMAPPING", "z117")]),
    ("XDDEVENTITYMAPPING", "z104", [("name", "string", "TagToTag"), ("sourcename", "string", "Tag"), ("destinationname", "string", "Tag"),
                                    ("mappingtypename", "string", "Undefined"), ("mappingnumber", "int16", "3"),
                                    ("autogenerateexpression", "bool", "1")],
     [("attributemappings", "0/0", "XDDEVATTRIBUTEMAPPING", "z118"),
      ("relationshipmappings", "0/0", "XDDEVRELATIONSHIPMAPPING", "z119")]),
    ("XDDEVENTITYMAPPING", "z105", [("sourcename", "string", "Note"), ("mappingtypename", "string", "Undefined"),
                                    ("mappingnumber", "int16", "4")], []),
    ("XDDEVATTRIBUTEMAPPING", "z110", [("name", "string", "name"), ("valueexpressiondata", "binary", b64(policy_call("shout:", "name")))], []),
    ("XDDEVATTRIBUTEMAPPING", "z111", [("name", "string", "email"), ("valueexpressiondata", "binary", b64(source_key("nickname")))], []),
    ("XDDEVATTRIBUTEMAPPING", "z112", [("name", "string", "age"), ("autogenerateexpression", "bool", "1")], []),
    ("XDDEVATTRIBUTEMAPPING", "z113", [("name", "string", "nickname"), ("autogenerateexpression", "bool", "1")], []),
    ("XDDEVRELATIONSHIPMAPPING", "z114", [("name", "string", "department"), ("autogenerateexpression", "bool", "1")], []),
    ("XDDEVRELATIONSHIPMAPPING", "z115", [("name", "string", "tags"), ("autogenerateexpression", "bool", "1")], []),
    ("XDDEVATTRIBUTEMAPPING", "z116", [("name", "string", "title"), ("autogenerateexpression", "bool", "1")], []),
    ("XDDEVRELATIONSHIPMAPPING", "z117", [("name", "string", "people"), ("autogenerateexpression", "bool", "1")], []),
    ("XDDEVATTRIBUTEMAPPING", "z118", [("name", "string", "label"), ("autogenerateexpression", "bool", "1")], []),
    ("XDDEVRELATIONSHIPMAPPING", "z119", [("name", "string", "people"), ("autogenerateexpression", "bool", "1")], []),
]

out = ['<?xml version="1.0" standalone="no"?>', '<!DOCTYPE database SYSTEM "file:///System/Library/DTDs/CoreData.dtd">', '', '<database>',
       '    <databaseInfo>', '        <version>134481920</version>', '        <nextObjectID>120</nextObjectID>', '    </databaseInfo>']
for (type_, id_, attributes, relationships) in objects:
    out.append(f'    <object type="{type_}" id="{id_}">')
    for (name, kind, value) in attributes:
        out.append(f'        <attribute name="{name}" type="{kind}">{value}</attribute>')
    for (name, kind, destination, refs) in relationships:
        out.append(f'        <relationship name="{name}" type="{kind}" destination="{destination}" idrefs="{refs}"></relationship>')
    out.append('    </object>')
out.append('</database>')
open("SmallToSmall2.xcmappingmodel/xcmapping.xml", "w").write("\n".join(out) + "\n")
